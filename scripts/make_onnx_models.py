#!/usr/bin/python3
"""Generates MLP, encoder, CNN, data-movement and recurrent (LSTM, GRU) ONNX models with weights, an input and the expected output (python3-onnx, numpy; no torch).

Each model goes to OUT/<name>/model.onnx with test_data_set_0/input_0.pb and output_0.pb, laid
out as ONNX's own test data, so `tessera run PACKAGE --input x=.../input_0.pb --expect y=.../output_0.pb`
checks it. The expected output is computed here in float64 from the float32 weights and input.

usage: scripts/make_onnx_models.py OUT [NAME...]   (default: every model below)
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# name: (input dims, hidden widths, output width, style, head[, activation])
# style "gemm": nn.Linear as torch.onnx.export writes it (Gemm, transB=1);
# style "matmul": MatMul + Add, with a rank-3 input and a torch-style Shape/Gather/Concat/Reshape flatten.
# head: "softmax", "identity", or "sigmoid"; activation between layers: "relu" (default), "tanh",
# or "gelu" (nn.GELU as torch exports it: x * 0.5 * (1 + Erf(x / sqrt(2)))), "gelu-ln" (GELU then
# nn.LayerNorm: LayerNormalization, opset 17), "gelu-ln-spelled" (GELU then a layer norm spelled
# out as torch.onnx.export writes nn.LayerNorm before opset 17: ReduceMean, Sub, Pow, ReduceMean,
# Add, Sqrt, Div, Mul, Add; the means are columns [..., 1] broadcast over each row).
MODELS = {
    "mlp-b2-w64-n3": ([2, 32], [64, 64], 16, "gemm", "softmax"),
    "mlp-b8-w1024-n4": ([8, 1024], [1024, 1024, 1024], 256, "gemm", "softmax"),
    "mlp-b16-w256-n8": ([16, 256], [256] * 7, 64, "gemm", "identity"),
    "mlp-b4x8-w512-n3": ([4, 8, 512], [512, 512], 128, "matmul", "softmax"),
    "mlp-b4-w96-gelu-ln": ([4, 48], [96, 96], 8, "gemm", "sigmoid", "gelu-ln"),
    "mlp-b8-w64-tanh": ([8, 64], [64], 10, "gemm", "softmax", "tanh"),
    "mlp-b4-w96-gelu-ln-spelled": ([4, 48], [96, 96], 8, "gemm", "sigmoid", "gelu-ln-spelled"),
}


def erf(values):
    return np.vectorize(math.erf)(values)


def checked_model(name, nodes, x_dims, y_dims, initializers, opset):
    """The ONNX model of `nodes` from input x to output y (IR version 8), checked by onnx's checker."""
    graph = helper.make_graph(nodes, name.replace("-", "_"),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_dims))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_dims))], initializers)
    model = helper.make_model(graph, producer_name="tessera make_onnx_models.py",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def linear(rng, fan_in, fan_out):
    bound = 1.0 / np.sqrt(fan_in)  # nn.Linear's default initialisation
    weight = rng.uniform(-bound, bound, size=(fan_out, fan_in)).astype(np.float32)
    bias = rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float32)
    return weight, bias


def reference_softmax(values):
    shifted = np.exp(values - values.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def reference_layer_norm(value, scale, shift, epsilon):
    mean = value.mean(axis=-1, keepdims=True)
    variance = ((value - mean) ** 2).mean(axis=-1, keepdims=True)
    return (value - mean) / np.sqrt(variance + np.float64(np.float32(epsilon))) * scale + shift


def reference_attention(q, k, v, heads):
    """Multi-head attention in float64, head by head on column blocks of [..., tokens, width] Q, K and V."""
    head = q.shape[-1] // heads
    context = np.empty_like(q)
    for h in range(heads):
        cols = slice(h * head, (h + 1) * head)
        scores = q[..., cols] @ np.swapaxes(k[..., cols], -1, -2) / np.float64(np.float32(math.sqrt(head)))
        context[..., cols] = reference_softmax(scores) @ v[..., cols]
    return context


def activation_nodes(kind, layer, value, reference, rng, width, initializers):
    """The nodes of one activation (named as torch.onnx.export names them), and its float64 value."""
    prefix = f"/layer{layer}"
    if kind == "relu":
        return [helper.make_node("Relu", [value], [f"layer{layer}.relu"], name=f"{prefix}/Relu")], \
            f"layer{layer}.relu", np.maximum(reference, 0.0)
    if kind == "tanh":
        return [helper.make_node("Tanh", [value], [f"{prefix}/Tanh_output_0"], name=f"{prefix}/Tanh")], \
            f"{prefix}/Tanh_output_0", np.tanh(reference)
    constants = {f"{prefix}/sqrt2": np.float32(math.sqrt(2.0)), f"{prefix}/one": np.float32(1.0),
                 f"{prefix}/half": np.float32(0.5)}
    initializers += [numpy_helper.from_array(np.array(v, dtype=np.float32), k) for k, v in constants.items()]
    names = [f"{prefix}/gelu/{step}" for step in ("Div", "Erf", "Add", "Mul", "Mul_1")]
    nodes = [helper.make_node("Div", [value, f"{prefix}/sqrt2"], [names[0] + "_output_0"], name=names[0]),
             helper.make_node("Erf", [names[0] + "_output_0"], [names[1] + "_output_0"], name=names[1]),
             helper.make_node("Add", [names[1] + "_output_0", f"{prefix}/one"], [names[2] + "_output_0"], name=names[2]),
             helper.make_node("Mul", [value, names[2] + "_output_0"], [names[3] + "_output_0"], name=names[3]),
             helper.make_node("Mul", [names[3] + "_output_0", f"{prefix}/half"], [names[4] + "_output_0"], name=names[4])]
    reference = reference * 0.5 * (1.0 + erf(reference / math.sqrt(2.0)))
    value = names[4] + "_output_0"
    if kind == "gelu-ln-spelled":
        scale = rng.uniform(0.5, 1.5, size=(width,)).astype(np.float32)
        shift = rng.uniform(-0.1, 0.1, size=(width,)).astype(np.float32)
        p = f"{prefix}/norm"
        initializers += [numpy_helper.from_array(scale, f"layer{layer}.norm.weight"),
                         numpy_helper.from_array(shift, f"layer{layer}.norm.bias"),
                         numpy_helper.from_array(np.array(2.0, dtype=np.float32), f"{p}/two"),
                         numpy_helper.from_array(np.array(1e-5, dtype=np.float32), f"{p}/eps")]
        steps = [("ReduceMean", [value], {"axes": [-1]}), ("Sub", [value, "ReduceMean"], {}),
                 ("Pow", ["Sub", f"{p}/two"], {}), ("ReduceMean_1", ["Pow"], {"axes": [-1]}),
                 ("Add", ["ReduceMean_1", f"{p}/eps"], {}), ("Sqrt", ["Add"], {}), ("Div", ["Sub", "Sqrt"], {}),
                 ("Mul", ["Div", f"layer{layer}.norm.weight"], {}), ("Add_1", ["Mul", f"layer{layer}.norm.bias"], {})]
        produced = set()
        for step, inputs, attributes in steps:
            names_in = [f"{p}/{i}_output_0" if i in produced else i for i in inputs]
            nodes.append(helper.make_node(step.split("_")[0], names_in, [f"{p}/{step}_output_0"], name=f"{p}/{step}",
                                          **attributes))
            produced.add(step)
        reference = reference_layer_norm(reference, scale, shift, 1e-5)
        value = f"{p}/Add_1_output_0"
    if kind == "gelu-ln":
        scale = rng.uniform(0.5, 1.5, size=(width,)).astype(np.float32)
        shift = rng.uniform(-0.1, 0.1, size=(width,)).astype(np.float32)
        initializers += [numpy_helper.from_array(scale, f"layer{layer}.norm.weight"),
                         numpy_helper.from_array(shift, f"layer{layer}.norm.bias")]
        out = f"{prefix}/norm/LayerNormalization_output_0"
        nodes.append(helper.make_node("LayerNormalization", [value, f"layer{layer}.norm.weight", f"layer{layer}.norm.bias"],
                                      [out], name=f"{prefix}/norm/LayerNormalization", axis=-1, epsilon=1e-5))
        reference = reference_layer_norm(reference, scale, shift, 1e-5)
        value = out
    return nodes, value, reference


def build(name, input_dims, hidden, out_width, style, head, activation="relu"):
    rng = np.random.default_rng(sum(map(ord, name)))  # fixed per model: the files are reproducible
    nodes, initializers = [], []
    x = rng.uniform(-1.0, 1.0, size=input_dims).astype(np.float32)
    value, reference = "x", x.astype(np.float64)
    widths = hidden + [out_width]
    fan_in = input_dims[-1]
    for layer, width in enumerate(widths):
        weight, bias = linear(rng, fan_in, width)
        w_name, b_name, out = f"layer{layer}.weight", f"layer{layer}.bias", f"layer{layer}.out"
        if style == "gemm":
            initializers += [numpy_helper.from_array(weight, w_name), numpy_helper.from_array(bias, b_name)]
            nodes.append(helper.make_node("Gemm", [value, w_name, b_name], [out], name=f"/layer{layer}/Gemm", transB=1))
        else:
            initializers += [numpy_helper.from_array(weight.T.copy(), w_name), numpy_helper.from_array(bias, b_name)]
            nodes.append(helper.make_node("MatMul", [value, w_name], [out + ".mm"], name=f"/layer{layer}/MatMul"))
            nodes.append(helper.make_node("Add", [out + ".mm", b_name], [out], name=f"/layer{layer}/Add"))
        reference = reference @ weight.astype(np.float64).T + bias.astype(np.float64)
        value, fan_in = out, width
        if layer + 1 < len(widths):
            added, value, reference = activation_nodes(activation, layer, value, reference, rng, width, initializers)
            nodes += added
    output_dims = list(input_dims[:-1]) + [out_width]
    if style == "matmul":
        # torch's x.flatten(0, 1): the new shape computed from Shape, Gather, Unsqueeze and Concat (folded at import).
        rows = int(np.prod(input_dims[:-1]))
        initializers += [numpy_helper.from_array(np.array(len(input_dims) - 1, dtype=np.int64), "last_axis"),
                         numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one"),
                         numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0")]
        nodes += [helper.make_node("Shape", [value], ["shape"], name="/flatten/Shape"),
                  helper.make_node("Gather", ["shape", "last_axis"], ["width"], name="/flatten/Gather", axis=0),
                  helper.make_node("Unsqueeze", ["width", "axes0"], ["width1"], name="/flatten/Unsqueeze"),
                  helper.make_node("Concat", ["minus_one", "width1"], ["new_shape"], name="/flatten/Concat", axis=0),
                  helper.make_node("Reshape", [value, "new_shape"], ["flat"], name="/flatten/Reshape")]
        value, output_dims = "flat", [rows, out_width]
        reference = reference.reshape(output_dims)
    if head == "softmax":
        nodes.append(helper.make_node("Softmax", [value], ["y"], name="/Softmax", axis=-1))
        reference = reference_softmax(reference)
    elif head == "sigmoid":
        nodes.append(helper.make_node("Sigmoid", [value], ["y"], name="/Sigmoid"))
        reference = 1.0 / (1.0 + np.exp(-reference))
    else:
        nodes.append(helper.make_node("Identity", [value], ["y"], name="/Identity"))
    model = checked_model(name, nodes, input_dims, output_dims, initializers, 17 if activation == "gelu-ln" else 13)
    return model, x, reference.astype(np.float32)


# name: (tokens, embedding width, heads, feed-forward width): a post-norm transformer encoder
# layer (nn.TransformerEncoderLayer's arithmetic, GELU) with its attention written per head
# (each head's Q, K, V projections, Q K^T / sqrt(d), Softmax, P V, and its share of the output
# projection, summed: the same values as concatenating the heads then projecting).
ENCODERS = {
    "encoder-s16-e32-h2": (16, 32, 2, 64),
}


def build_encoder(name, tokens, width, heads, ffn):
    rng = np.random.default_rng(sum(map(ord, name)))  # fixed per model: the files are reproducible
    head = width // heads
    x = rng.uniform(-1.0, 1.0, size=(tokens, width)).astype(np.float32)
    nodes, initializers = [], []

    def weight(array, weight_name):
        initializers.append(numpy_helper.from_array(array.astype(np.float32), weight_name))
        return weight_name

    def layer_norm(value, reference, prefix):
        scale = rng.uniform(0.5, 1.5, size=(width,)).astype(np.float32)
        shift = rng.uniform(-0.1, 0.1, size=(width,)).astype(np.float32)
        out = f"{prefix}/LayerNormalization_output_0"
        nodes.append(helper.make_node("LayerNormalization", [value, weight(scale, f"{prefix}.weight"),
                                                             weight(shift, f"{prefix}.bias")],
                                      [out], name=f"{prefix}/LayerNormalization", axis=-1, epsilon=1e-5))
        return out, reference_layer_norm(reference, scale, shift, 1e-5)

    reference_x = x.astype(np.float64)
    attention = None
    for h in range(heads):
        p = f"/attn/head{h}"
        projected = {}
        for role in ("q", "k", "v"):
            w, b = linear(rng, width, head)
            out = f"{p}/{role}"
            nodes.append(helper.make_node("Gemm", ["x", weight(w, f"attn.{role}{h}.weight"),
                                                   weight(b, f"attn.{role}{h}.bias")], [out], name=f"{p}/{role}/Gemm",
                                          transB=1))
            projected[role] = (out, reference_x @ w.astype(np.float64).T + b)
        scale = weight(np.array(1.0 / math.sqrt(head), dtype=np.float32), f"{p}/scale")
        nodes += [helper.make_node("Transpose", [projected["k"][0]], [f"{p}/kT"], name=f"{p}/Transpose", perm=[1, 0]),
                  helper.make_node("MatMul", [projected["q"][0], f"{p}/kT"], [f"{p}/scores"], name=f"{p}/MatMul"),
                  helper.make_node("Mul", [f"{p}/scores", scale], [f"{p}/scaled"], name=f"{p}/Mul"),
                  helper.make_node("Softmax", [f"{p}/scaled"], [f"{p}/probs"], name=f"{p}/Softmax", axis=-1),
                  helper.make_node("MatMul", [f"{p}/probs", projected["v"][0]], [f"{p}/context"],
                                   name=f"{p}/MatMul_1")]
        scores = projected["q"][1] @ projected["k"][1].T * np.float64(np.float32(1.0 / math.sqrt(head)))
        context = reference_softmax(scores) @ projected["v"][1]
        w_out = rng.uniform(-1.0 / math.sqrt(width), 1.0 / math.sqrt(width), size=(head, width)).astype(np.float32)
        nodes.append(helper.make_node("MatMul", [f"{p}/context", weight(w_out, f"attn.out{h}.weight")],
                                      [f"{p}/out"], name=f"{p}/MatMul_2"))
        part = (f"{p}/out", context @ w_out.astype(np.float64))
        if attention is None:
            attention = part
        else:
            nodes.append(helper.make_node("Add", [attention[0], part[0]], [f"{p}/sum"], name=f"{p}/Add"))
            attention = (f"{p}/sum", attention[1] + part[1])
    bias = rng.uniform(-0.1, 0.1, size=(width,)).astype(np.float32)
    nodes += [helper.make_node("Add", [attention[0], weight(bias, "attn.out.bias")], ["/attn/out"], name="/attn/Add"),
              helper.make_node("Add", ["/attn/out", "x"], ["/residual1"], name="/Add")]
    norm1, reference = layer_norm("/residual1", attention[1] + bias + reference_x, "/norm1")
    w1, b1 = linear(rng, width, ffn)
    nodes.append(helper.make_node("Gemm", [norm1, weight(w1, "ffn.1.weight"), weight(b1, "ffn.1.bias")], ["/ffn/h"],
                                  name="/ffn/Gemm", transB=1))
    hidden = reference @ w1.astype(np.float64).T + b1
    added, value, hidden = activation_nodes("gelu", 0, "/ffn/h", hidden, rng, ffn, initializers)
    nodes += added
    w2, b2 = linear(rng, ffn, width)
    nodes += [helper.make_node("Gemm", [value, weight(w2, "ffn.2.weight"), weight(b2, "ffn.2.bias")], ["/ffn/out"],
                               name="/ffn/Gemm_1", transB=1),
              helper.make_node("Add", [norm1, "/ffn/out"], ["/residual2"], name="/Add_1")]
    out, reference = layer_norm("/residual2", reference + hidden @ w2.astype(np.float64).T + b2, "/norm2")
    nodes.append(helper.make_node("Identity", [out], ["y"], name="/Identity"))
    return checked_model(name, nodes, [tokens, width], [tokens, width], initializers, 17), x, reference.astype(np.float32)


class TorchGraph:
    """Nodes named as torch.onnx.export names them: /scope/Op, /scope/Op_1, ..., with outputs <name>_output_0."""

    def __init__(self, rng):
        self.rng, self.nodes, self.initializers, self.counts = rng, [], [], {}

    def node(self, scope, op, inputs, output=None, **attributes):
        count = self.counts.get((scope, op), 0)
        self.counts[(scope, op)] = count + 1
        name = f"{scope}/{op}" + (f"_{count}" if count else "")
        output = output or f"{name}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [output], name=name, **attributes))
        return output

    def constant(self, scope, value, dtype=np.int64):
        return self.node(scope, "Constant", [], value=numpy_helper.from_array(np.array(value, dtype=dtype)))

    def weight(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    def linear(self, scope, value, reference, fan_in, fan_out, weight_name, bias_name):
        """nn.Linear on a rank-3 input: MatMul by the weight stored transposed [in, out], then Add(bias, product)."""
        weight, bias = linear(self.rng, fan_in, fan_out)
        product = self.node(scope, "MatMul", [value, self.weight(weight_name, weight.T)])
        return self.node(scope, "Add", [self.weight(bias_name, bias), product]), \
            reference @ weight.astype(np.float64).T + bias

    def layer_norm(self, scope, value, reference, name, epsilon, output=None):
        scale = self.rng.uniform(0.5, 1.5, size=reference.shape[-1:]).astype(np.float32)
        shift = self.rng.uniform(-0.1, 0.1, size=reference.shape[-1:]).astype(np.float32)
        inputs = [value, self.weight(f"{name}.weight", scale), self.weight(f"{name}.bias", shift)]
        return self.node(scope, "LayerNormalization", inputs, output, axis=-1, epsilon=epsilon), \
            reference_layer_norm(reference, scale, shift, epsilon)

    def gelu(self, scope, value, reference):
        """nn.GELU() or F.gelu (erf form): Div by sqrt(2), Erf, Add 1, Mul by the input, Mul by 0.5 (Constants)."""
        divided = self.node(scope, "Div", [value, self.constant(scope, math.sqrt(2.0), np.float32)])
        added = self.node(scope, "Add", [self.node(scope, "Erf", [divided]), self.constant(scope, 1.0, np.float32)])
        product = self.node(scope, "Mul", [value, added])
        return self.node(scope, "Mul", [product, self.constant(scope, 0.5, np.float32)]), \
            reference * 0.5 * (1.0 + erf(reference / math.sqrt(2.0)))

    def model(self, name, x):
        self.initializers.sort(key=lambda t: t.name.startswith("onnx::"))  # torch lists the folded weights last
        return checked_model(name, self.nodes, x.shape, x.shape, self.initializers, 17)


# name: (batch, tokens, embedding width, heads, feed-forward width): nn.TransformerEncoderLayer(width, heads, ffn,
# dropout=0.0, activation="gelu", batch_first=True) in eval mode as torch.onnx.export (torch 1.13, opset 17,
# do_constant_folding, static shapes) writes it with grad enabled, as by default (under torch.no_grad() the layer
# takes its fused fast path, aten::_transformer_encoder_layer_fwd, which does not export). The nodes, their names and
# the initializers are torch's, in its order: Transpose x [1, 0, 2] to [tokens, batch, width]; MatMul by the packed
# in_proj weight stored transposed [width, 3 width], Add(in_proj_bias, product); chunk(3) as three Slices on axis -1
# whose bounds are computed in the graph: Shape, Gather(Constant [-1], axis 0), Add 2, Div 3, Mul 1, 2, 3 (int64
# [1]); Q, K and V Reshape [tokens, batch heads, head width]; Q Transpose [1, 0, 2] and Div by sqrt(head width),
# K Transpose [1, 2, 0], V Transpose [1, 0, 2]; MatMul, Softmax(-1), MatMul; Transpose [1, 0, 2], Reshape
# [tokens batch, width], Gemm (out_proj, transB=1), Reshape [tokens, batch, width], Transpose [1, 0, 2]; Add x,
# LayerNormalization; linear1 (MatMul, Add), GELU, linear2, Add, LayerNormalization, whose output is y. (torch
# also writes an Identity for each parameter equal to an earlier one, such as nn.Linear's zero biases and
# nn.LayerNorm's unit weights as initialised; the weights here all differ, so as with torch there is none.)
TORCH_ENCODERS = {
    "encoder-torch-s16-e32-h2": (1, 16, 32, 2, 64),
}


def build_torch_encoder(name, batch, tokens, width, heads, ffn):
    rng = np.random.default_rng(sum(map(ord, name)))  # fixed per model: the files are reproducible
    g, a, head = TorchGraph(rng), "/self_attn", width // heads
    x = rng.uniform(-1.0, 1.0, size=(batch, tokens, width)).astype(np.float32)
    reference_x = x.astype(np.float64)
    packed, qkv = g.linear(a, g.node(a, "Transpose", ["x"], perm=[1, 0, 2]), reference_x, width, 3 * width,
                           "onnx::MatMul_110", "self_attn.in_proj_bias")
    shape = g.node(a, "Shape", [packed])
    last_axis = g.constant(a, [-1])
    size = g.node(a, "Gather", [shape, last_axis], axis=0)
    begin = g.constant(a, [0])
    third = g.node(a, "Div", [g.node(a, "Add", [size, g.constant(a, [2])]), g.constant(a, [3])])
    slices = []
    for i in (1, 2, 3):
        end = g.node(a, "Mul", [third, g.constant(a, [i])])
        slices.append(g.node(a, "Slice", [packed, begin, end, last_axis]))
        begin = end
    q, k, v = slices
    split = [tokens, batch * heads, head]
    q = g.node(a, "Transpose", [g.node(a, "Reshape", [q, g.constant(a, split)], allowzero=0)], perm=[1, 0, 2])
    k = g.node(a, "Reshape", [k, g.constant(a, split)], allowzero=0)
    v = g.node(a, "Transpose", [g.node(a, "Reshape", [v, g.constant(a, split)], allowzero=0)], perm=[1, 0, 2])
    q = g.node(a, "Div", [q, g.constant(a, math.sqrt(head), np.float32)])
    probs = g.node(a, "Softmax", [g.node(a, "MatMul", [q, g.node(a, "Transpose", [k], perm=[1, 2, 0])])], axis=-1)
    context = g.node(a, "Transpose", [g.node(a, "MatMul", [probs, v])], perm=[1, 0, 2])
    context = g.node(a, "Reshape", [context, g.constant(a, [tokens * batch, width])], allowzero=0)
    w_out, b_out = linear(rng, width, width)
    out_proj = [g.weight("self_attn.out_proj.weight", w_out), g.weight("self_attn.out_proj.bias", b_out)]
    out = g.node(a, "Gemm", [context] + out_proj, alpha=1.0, beta=1.0, transB=1)
    out = g.node(a, "Reshape", [out, g.constant(a, [tokens, batch, width])], allowzero=0)
    out = g.node(a, "Transpose", [out], perm=[1, 0, 2])
    attention = reference_attention(*np.split(qkv, 3, axis=-1), heads) @ w_out.astype(np.float64).T + b_out
    norm1, reference = g.layer_norm("/norm1", g.node("", "Add", ["x", out]), reference_x + attention, "norm1", 1e-5)
    hidden, ref_hidden = g.linear("/linear1", norm1, reference, width, ffn, "onnx::MatMul_130", "linear1.bias")
    hidden, ref_hidden = g.gelu("", hidden, ref_hidden)
    hidden, ref_hidden = g.linear("/linear2", hidden, ref_hidden, ffn, width, "onnx::MatMul_131", "linear2.bias")
    _, reference = g.layer_norm("/norm2", g.node("", "Add", [norm1, hidden]), reference + ref_hidden, "norm2", 1e-5,
                                "y")
    modules = ["self_attn.", "linear1.", "linear2.", "norm1.", "norm2.", "onnx::"]  # torch's order of initializers
    g.initializers.sort(key=lambda t: next(i for i, module in enumerate(modules) if t.name.startswith(module)))
    return g.model(name, x), x, reference.astype(np.float32)


# name: (batch, tokens, embedding width, heads, feed-forward width, layers): a stack of post-norm BERT encoder
# layers, a hand-written Hugging Face BERT-style module (layers.N.{query,key,value,dense,ln1,inter,act,out,ln2}) as
# torch.onnx.export (torch 1.13, opset 17, do_constant_folding, static shapes) writes it, with torch's node and
# initializer names: query, key and value nn.Linear (MatMul by the weight stored transposed, Add(bias, product)),
# each .view(batch, tokens, heads, head width) as Reshape by a Constant [batch, tokens, heads, head width]; Q and V
# .permute(0, 2, 1, 3) as Transpose [0, 2, 1, 3]; K .permute(0, 2, 1, 3).transpose(-1, -2) as one Transpose
# [0, 2, 3, 1]; MatMul, Div by Constant sqrt(head width), Softmax(-1), MatMul; .permute(0, 2, 1, 3).contiguous()
# .view(batch, tokens, width) as Transpose [0, 2, 1, 3] and Reshape (.reshape exports the same); dense, Add the
# layer input, LayerNormalization (eps 1e-12); inter, nn.GELU() (Div, Erf, Add, Mul, Mul), out, Add,
# LayerNormalization; the last layer's output is y. No Shape chain is left: with static shapes torch folds them.
BERT_ENCODERS = {
    "bert-s16-e64-h4-l2": (1, 16, 64, 4, 128, 2),
    "bert-s128-e256-h4-l2": (1, 128, 256, 4, 1024, 2),
    "bert-s128-e256-h4-l8": (1, 128, 256, 4, 1024, 8),
    "bert-base-s128": (1, 128, 768, 12, 3072, 12),
}


def build_bert(name, batch, tokens, width, heads, ffn, layers):
    rng = np.random.default_rng(sum(map(ord, name)))  # fixed per model: the files are reproducible
    g, head = TorchGraph(rng), width // heads
    x = rng.uniform(-1.0, 1.0, size=(batch, tokens, width)).astype(np.float32)
    value, reference = "x", x.astype(np.float64)
    for layer in range(layers):
        s, p, number = f"/layers.{layer}", f"layers.{layer}", 195 + 25 * layer  # torch names: onnx::MatMul_<number+i>
        q, ref_q = g.linear(f"{s}/query", value, reference, width, width, f"onnx::MatMul_{number}", f"{p}.query.bias")
        split = [g.constant(s, [batch, tokens, heads, head]) for _ in range(3)]
        q = g.node(s, "Transpose", [g.node(s, "Reshape", [q, split[0]], allowzero=0)], perm=[0, 2, 1, 3])
        k, ref_k = g.linear(f"{s}/key", value, reference, width, width, f"onnx::MatMul_{number + 16}", f"{p}.key.bias")
        k = g.node(s, "Reshape", [k, split[1]], allowzero=0)
        v, ref_v = g.linear(f"{s}/value", value, reference, width, width, f"onnx::MatMul_{number + 17}",
                            f"{p}.value.bias")
        v = g.node(s, "Transpose", [g.node(s, "Reshape", [v, split[2]], allowzero=0)], perm=[0, 2, 1, 3])
        scores = g.node(s, "MatMul", [q, g.node(s, "Transpose", [k], perm=[0, 2, 3, 1])])
        scores = g.node(s, "Div", [scores, g.constant(s, math.sqrt(head), np.float32)])
        context = g.node(s, "MatMul", [g.node(s, "Softmax", [scores], axis=-1), v])
        context = g.node(s, "Transpose", [context], perm=[0, 2, 1, 3])
        context = g.node(s, "Reshape", [context, g.constant(s, [batch, tokens, width])], allowzero=0)
        dense, ref_dense = g.linear(f"{s}/dense", context, reference_attention(ref_q, ref_k, ref_v, heads), width,
                                    width, f"onnx::MatMul_{number + 22}", f"{p}.dense.bias")
        norm1, ref_norm1 = g.layer_norm(f"{s}/ln1", g.node(s, "Add", [dense, value]), ref_dense + reference,
                                        f"{p}.ln1", 1e-12)
        hidden, ref_hidden = g.linear(f"{s}/inter", norm1, ref_norm1, width, ffn, f"onnx::MatMul_{number + 23}",
                                      f"{p}.inter.bias")
        hidden, ref_hidden = g.gelu(f"{s}/act", hidden, ref_hidden)
        hidden, ref_hidden = g.linear(f"{s}/out", hidden, ref_hidden, ffn, width, f"onnx::MatMul_{number + 24}",
                                      f"{p}.out.bias")
        value, reference = g.layer_norm(f"{s}/ln2", g.node(s, "Add", [hidden, norm1]), ref_hidden + ref_norm1,
                                        f"{p}.ln2", 1e-12, "y" if layer + 1 == layers else None)
    return g.model(name, x), x, reference.astype(np.float32)


# name: (batch, input channels, height, width, architecture): convolutional networks written
# node by node as torch.onnx.export writes them for inference (Conv with BatchNormalization,
# Relu, MaxPool, residual Add, GlobalAveragePool, Flatten, Gemm), random weights from a fixed
# seed. "resnet18" is torchvision's resnet18 (BasicBlocks [2, 2, 2, 2], 1000 classes), "resnet50"
# its resnet50 (Bottlenecks [3, 4, 6, 3], the stride on the 3x3 conv as torchvision's v1.5);
# "mobilenetv2" its mobilenet_v2 (inverted residuals with depthwise convs and ReLU6 as Clip 0..6);
# "tiny" a small network that also has a depthwise conv, a dilated one, an AveragePool with
# ceil_mode and a 1-D view of nothing (all on 16 tiles in a second).
CNNS = {
    "cnn-tiny-b2": (2, 3, 12, 12, "tiny"),
    "resnet18-b1-64": (1, 3, 64, 64, "resnet18"),
    "resnet18-b1-224": (1, 3, 224, 224, "resnet18"),
    "resnet50-b1-224": (1, 3, 224, 224, "resnet50"),
    "mobilenetv2-b1-64": (1, 3, 64, 64, "mobilenetv2"),
    "mobilenetv2-b1-224": (1, 3, 224, 224, "mobilenetv2"),
}


def reference_conv(x, w, b, stride, pads, dilation, group):
    """ONNX Conv in float64: x [N, C, H, W], w [M, C/group, kH, kW], pads (top, left, bottom, right)."""
    n, c, h, width = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - (kh - 1) * dilation - 1) // stride + 1
    ow = (width + pads[1] + pads[3] - (kw - 1) * dilation - 1) // stride + 1
    out = np.zeros((n, m, oh, ow))
    mg = m // group
    for i in range(kh):
        for j in range(kw):
            taps = xp[:, :, i * dilation:i * dilation + (oh - 1) * stride + 1:stride,
                      j * dilation:j * dilation + (ow - 1) * stride + 1:stride]
            for g in range(group):
                out[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", taps[:, g * cg:(g + 1) * cg],
                                                         w[g * mg:(g + 1) * mg, :, i, j])
    return out + (0 if b is None else b[None, :, None, None])


def reference_pool(x, kind, kernel, stride, pads, ceil_mode=False, count_include_pad=False):
    """ONNX MaxPool / AveragePool in float64 (pads top, left, bottom, right)."""
    n, c, h, width = x.shape
    extra = [0, 0]
    for axis, size in enumerate((h, width)):
        room = size + pads[axis] + pads[axis + 2] - kernel
        out = (-(-room // stride) if ceil_mode else room // stride) + 1
        if ceil_mode and (out - 1) * stride >= size + pads[axis]:
            out -= 1
        extra[axis] = max(0, (out - 1) * stride + kernel - (size + pads[axis] + pads[axis + 2]))
    fill = -np.inf if kind == "max" else 0.0
    widths = ((0, 0), (0, 0), (pads[0], pads[2] + extra[0]), (pads[1], pads[3] + extra[1]))
    xp = np.pad(x, widths, constant_values=fill)
    inside = np.pad(np.ones_like(x), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=1.0
                    if count_include_pad else 0.0)
    inside = np.pad(inside, ((0, 0), (0, 0), (0, extra[0]), (0, extra[1])))
    oh = (xp.shape[2] - kernel) // stride + 1
    ow = (xp.shape[3] - kernel) // stride + 1
    result = np.full((n, c, oh, ow), fill)
    counts = np.zeros((n, c, oh, ow))
    for i in range(kernel):
        for j in range(kernel):
            taps = xp[:, :, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride]
            counts += inside[:, :, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride]
            result = np.maximum(result, taps) if kind == "max" else result + taps
    return result if kind == "max" else result / counts


class CnnGraph:
    """Nodes, initializers and the float64 reference of a CNN, built layer by layer."""

    def __init__(self, rng):
        self.rng, self.nodes, self.initializers, self.count = rng, [], [], 0

    def name(self, kind):
        self.count += 1
        return f"/{kind}_{self.count}"

    def weight(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array).astype(np.float32), name))
        return name

    def conv(self, value, reference, outs, kernel, stride=1, pad=0, dilation=1, group=1, bias=False, bn=True,
             relu=True):
        ins = reference.shape[1]
        scope = self.name("conv")
        bound = math.sqrt(6.0 / (ins // group * kernel * kernel))
        w = self.rng.uniform(-bound, bound, size=(outs, ins // group, kernel, kernel)).astype(np.float32)
        b = self.rng.uniform(-0.1, 0.1, size=outs).astype(np.float32) if bias else None
        inputs = [value, self.weight(scope + ".weight", w)] + ([self.weight(scope + ".bias", b)] if bias else [])
        out = scope + "/Conv_output_0"
        self.nodes.append(helper.make_node("Conv", inputs, [out], name=scope + "/Conv", kernel_shape=[kernel, kernel],
                                           strides=[stride, stride], pads=[pad] * 4, dilations=[dilation] * 2,
                                           group=group))
        reference = reference_conv(reference, w.astype(np.float64), None if b is None else b.astype(np.float64),
                                   stride, [pad] * 4, dilation, group)
        if bn:
            scale = self.rng.uniform(0.5, 1.5, size=outs).astype(np.float32)
            shift = self.rng.uniform(-0.1, 0.1, size=outs).astype(np.float32)
            mean = self.rng.uniform(-0.1, 0.1, size=outs).astype(np.float32)
            var = self.rng.uniform(0.5, 1.5, size=outs).astype(np.float32)
            names = [self.weight(f"{scope}.bn.{part}", a) for part, a in
                     (("weight", scale), ("bias", shift), ("running_mean", mean), ("running_var", var))]
            self.nodes.append(helper.make_node("BatchNormalization", [out] + names, [scope + "/bn"],
                                               name=scope + "/BatchNormalization", epsilon=1e-5))
            out = scope + "/bn"
            per = lambda a: a.astype(np.float64)[None, :, None, None]  # noqa: E731
            reference = (reference - per(mean)) / np.sqrt(per(var) + 1e-5) * per(scale) + per(shift)
        if relu == "relu6":
            out, reference = self.relu6(out, reference)
        elif relu:
            out, reference = self.relu(out, reference)
        return out, reference

    def relu6(self, value, reference):
        """nn.ReLU6 as torch exports it (opset 11+): Clip with constant min 0 and max 6."""
        scope = self.name("relu6")
        low, high = self.weight(scope + ".min", np.array(0.0)), self.weight(scope + ".max", np.array(6.0))
        out = scope + "/Clip_output_0"
        self.nodes.append(helper.make_node("Clip", [value, low, high], [out], name=scope + "/Clip"))
        return out, np.clip(reference, 0.0, 6.0)

    def inverted_residual(self, value, reference, outs, stride, expand):
        """torchvision's InvertedResidual: 1x1 expansion, 3x3 depthwise (strided), 1x1 projection."""
        ins = reference.shape[1]
        out, ref = value, reference
        if expand != 1:
            out, ref = self.conv(out, ref, ins * expand, 1, relu="relu6")
        out, ref = self.conv(out, ref, ins * expand, 3, stride, 1, group=ins * expand, relu="relu6")
        out, ref = self.conv(out, ref, outs, 1, relu=False)
        if stride == 1 and ins == outs:
            out, ref = self.add(out, value, ref + reference)
        return out, ref

    def relu(self, value, reference):
        out = self.name("relu") + "/Relu_output_0"
        self.nodes.append(helper.make_node("Relu", [value], [out], name=out.rsplit("/", 1)[0] + "/Relu"))
        return out, np.maximum(reference, 0.0)

    def add(self, a, b, reference):
        out = self.name("add") + "/Add_output_0"
        self.nodes.append(helper.make_node("Add", [a, b], [out], name=out.rsplit("/", 1)[0] + "/Add"))
        return out, reference

    def pool(self, value, reference, kind, kernel, stride, pad, ceil_mode=0, count_include_pad=0):
        out = self.name(kind + "pool") + "/output_0"
        op = "MaxPool" if kind == "max" else "AveragePool"
        attributes = dict(kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4, ceil_mode=ceil_mode)
        if kind != "max":
            attributes["count_include_pad"] = count_include_pad
        self.nodes.append(helper.make_node(op, [value], [out], name=out.rsplit("/", 1)[0] + "/" + op, **attributes))
        return out, reference_pool(reference, kind, kernel, stride, [pad] * 4, bool(ceil_mode),
                                   bool(count_include_pad))

    def head(self, value, reference, classes):
        """GlobalAveragePool, Flatten and a Gemm to `classes`: torchvision's classifier."""
        pooled = self.name("avgpool") + "/GlobalAveragePool_output_0"
        self.nodes.append(helper.make_node("GlobalAveragePool", [value], [pooled], name=pooled.rsplit("/", 1)[0]))
        flat = self.name("flatten") + "/Flatten_output_0"
        self.nodes.append(helper.make_node("Flatten", [pooled], [flat], name=flat.rsplit("/", 1)[0], axis=1))
        features = reference.mean(axis=(2, 3))
        bound = 1.0 / math.sqrt(features.shape[1])
        w = self.rng.uniform(-bound, bound, size=(classes, features.shape[1])).astype(np.float32)
        b = self.rng.uniform(-bound, bound, size=classes).astype(np.float32)
        self.nodes.append(helper.make_node("Gemm", [flat, self.weight("fc.weight", w), self.weight("fc.bias", b)],
                                           ["y"], name="/fc/Gemm", transB=1))
        return features @ w.astype(np.float64).T + b.astype(np.float64)

    def basic_block(self, value, reference, outs, stride):
        """torchvision's BasicBlock: two 3x3 convs, a 1x1 strided projection when the shape changes."""
        shortcut, ref_shortcut = value, reference
        if stride != 1 or reference.shape[1] != outs:
            shortcut, ref_shortcut = self.conv(value, reference, outs, 1, stride, relu=False)
        out, ref = self.conv(value, reference, outs, 3, stride, 1)
        out, ref = self.conv(out, ref, outs, 3, 1, 1, relu=False)
        out, ref = self.add(out, shortcut, ref + ref_shortcut)
        return self.relu(out, ref)

    def bottleneck(self, value, reference, planes, stride):
        """torchvision's Bottleneck: 1x1 to planes, 3x3 (strided), 1x1 to 4 * planes, projected shortcut."""
        shortcut, ref_shortcut = value, reference
        if stride != 1 or reference.shape[1] != 4 * planes:
            shortcut, ref_shortcut = self.conv(value, reference, 4 * planes, 1, stride, relu=False)
        out, ref = self.conv(value, reference, planes, 1)
        out, ref = self.conv(out, ref, planes, 3, stride, 1)
        out, ref = self.conv(out, ref, 4 * planes, 1, relu=False)
        out, ref = self.add(out, shortcut, ref + ref_shortcut)
        return self.relu(out, ref)


def build_cnn(name, batch, channels, height, width, architecture):
    rng = np.random.default_rng(sum(map(ord, name)))  # fixed per model: the files are reproducible
    g = CnnGraph(rng)
    x = rng.uniform(-1.0, 1.0, size=(batch, channels, height, width)).astype(np.float32)
    value, reference = "x", x.astype(np.float64)
    if architecture.startswith("resnet"):
        value, reference = g.conv(value, reference, 64, 7, 2, 3)
        value, reference = g.pool(value, reference, "max", 3, 2, 1)
        blocks = [2, 2, 2, 2] if architecture == "resnet18" else [3, 4, 6, 3]
        for (planes, stride), count in zip(((64, 1), (128, 2), (256, 2), (512, 2)), blocks):
            for block in range(count):
                block_stride = stride if block == 0 else 1
                if architecture == "resnet18":
                    value, reference = g.basic_block(value, reference, planes, block_stride)
                else:
                    value, reference = g.bottleneck(value, reference, planes, block_stride)
        reference = g.head(value, reference, 1000)
    elif architecture == "mobilenetv2":
        value, reference = g.conv(value, reference, 32, 3, 2, 1, relu="relu6")
        for expand, outs, count, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                                            (6, 160, 3, 2), (6, 320, 1, 1)):
            for block in range(count):
                value, reference = g.inverted_residual(value, reference, outs, stride if block == 0 else 1, expand)
        value, reference = g.conv(value, reference, 1280, 1, relu="relu6")
        reference = g.head(value, reference, 1000)
    else:
        value, reference = g.conv(value, reference, 8, 3, 1, 1)
        value, reference = g.pool(value, reference, "max", 2, 2, 0)
        skip, ref_skip = value, reference
        value, reference = g.conv(value, reference, 8, 3, 1, 1, group=8)              # depthwise
        value, reference = g.conv(value, reference, 8, 3, 1, 2, dilation=2, bias=True, bn=False)
        value, reference = g.add(value, skip, reference + ref_skip)
        value, reference = g.conv(value, reference, 16, 1, bias=True, bn=False, relu=False)
        value, reference = g.pool(value, reference, "avg", 3, 2, 1, ceil_mode=1)     # 6x6 -> 3x3, windows past the end
        reference = g.head(value, reference, 10)
    return checked_model(name, g.nodes, x.shape, reference.shape, g.initializers, 13), x, reference.astype(np.float32)


# name: (input dims,). Data movement on computed tensors (each node a gather on the device):
# "mlp-concat-branches": two Gemm branches (ReLU, Tanh) of one input joined by Concat, then a Gemm and Softmax;
# "movement-pad-slice": reflect Pad, DepthToSpace, a Slice with steps, a Transpose moving the first axis, a
#   constant Pad, a Reshape, a MatMul, then Split and Concat in the other order;
# "movement-resize-gather": nearest Resize, SpaceToDepth, Gather on axis 1, Tile, Expand, Flatten and a Gemm;
# "movement-conv-concat": two Convs of one image joined by Concat on channels, a nearest Resize by 2, a strided
#   Conv: feature maps laid out channels last read and written by gathers.
MOVEMENT = {
    "mlp-concat-branches": ([4, 32],),
    "movement-pad-slice": ([2, 8, 6, 6],),
    "movement-resize-gather": ([1, 3, 4, 4],),
    "movement-conv-concat": ([1, 3, 8, 8],),
}


def reference_depth_to_space(x, block):
    n, c, h, w = x.shape
    return x.reshape(n, block, block, c // (block * block), h, w).transpose(0, 3, 4, 1, 5, 2).reshape(
        n, c // (block * block), h * block, w * block)


def reference_space_to_depth(x, block):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // block, block, w // block, block).transpose(0, 3, 5, 1, 2, 4).reshape(
        n, c * block * block, h // block, w // block)


def build_movement(name, input_dims):
    rng = np.random.default_rng(sum(map(ord, name)))  # fixed per model: the files are reproducible
    x = rng.uniform(-1.0, 1.0, size=input_dims).astype(np.float32)
    ref = x.astype(np.float64)
    nodes, initializers = [], []

    def constant(array, const_name):
        initializers.append(numpy_helper.from_array(np.asarray(array), const_name))
        return const_name

    if name == "mlp-concat-branches":
        branches = []
        for branch, (width, act) in enumerate(((48, "Relu"), (16, "Tanh"))):
            weight, bias = linear(rng, input_dims[-1], width)
            w, b = constant(weight, f"branch{branch}.weight"), constant(bias, f"branch{branch}.bias")
            nodes += [helper.make_node("Gemm", ["x", w, b], [f"branch{branch}.linear"], transB=1),
                      helper.make_node(act, [f"branch{branch}.linear"], [f"branch{branch}.out"])]
            value = ref @ weight.astype(np.float64).T + bias.astype(np.float64)
            branches.append(np.maximum(value, 0) if act == "Relu" else np.tanh(value))
        nodes.append(helper.make_node("Concat", ["branch0.out", "branch1.out"], ["joined"], axis=1))
        weight, bias = linear(rng, 64, 10)
        nodes += [helper.make_node("Gemm", ["joined", constant(weight, "head.weight"), constant(bias, "head.bias")],
                                   ["logits"], transB=1),
                  helper.make_node("Softmax", ["logits"], ["y"], axis=-1)]
        ref = reference_softmax(np.concatenate(branches, axis=1) @ weight.astype(np.float64).T + bias)
        opset = 13
    elif name == "movement-pad-slice":
        nodes += [helper.make_node("Pad", ["x", constant(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")],
                                   ["padded"], mode="reflect"),
                  helper.make_node("DepthToSpace", ["padded"], ["space"], blocksize=2, mode="DCR"),
                  helper.make_node("Slice", ["space", constant(np.array([1, 0], np.int64), "starts"),
                                             constant(np.array([16, 16], np.int64), "ends"),
                                             constant(np.array([2, -1], np.int64), "axes"),
                                             constant(np.array([2, 3], np.int64), "steps")], ["sliced"]),
                  helper.make_node("Transpose", ["sliced"], ["moved"], perm=[3, 0, 2, 1]),
                  helper.make_node("Pad", ["moved", constant(np.array([0, 1, 0, 0, 0, 0, 0, 0], np.int64), "pads1"),
                                           constant(np.array(0.5, np.float32), "half")], ["filled"]),
                  helper.make_node("Reshape", ["filled", constant(np.array([18, 16], np.int64), "rows")], ["flat"])]
        ref = np.pad(ref, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect")
        ref = reference_depth_to_space(ref, 2)[:, :, 1:16:2, 0:16:3].transpose(3, 0, 2, 1)
        ref = np.pad(ref, ((0, 0), (1, 0), (0, 0), (0, 0)), constant_values=0.5).reshape(18, 16)
        weight = rng.uniform(-0.5, 0.5, size=(16, 8)).astype(np.float32)
        nodes += [helper.make_node("MatMul", ["flat", constant(weight, "weight")], ["product"]),
                  helper.make_node("Relu", ["product"], ["activated"]),
                  helper.make_node("Split", ["activated", constant(np.array([3, 5], np.int64), "split")],
                                   ["left", "right"], axis=1),
                  helper.make_node("Concat", ["right", "left"], ["y"], axis=-1)]
        ref = np.maximum(ref @ weight.astype(np.float64), 0)
        ref = np.concatenate([ref[:, 3:], ref[:, :3]], axis=1)
        opset = 13
    elif name == "movement-conv-concat":
        def conv(inputs, out, outs, ins, kernel, stride, pad):
            w = rng.uniform(-0.3, 0.3, size=(outs, ins, kernel, kernel)).astype(np.float32)
            b = rng.uniform(-0.1, 0.1, size=(outs,)).astype(np.float32)
            nodes.append(helper.make_node("Conv", [inputs, constant(w, out + ".weight"), constant(b, out + ".bias")],
                                          [out], kernel_shape=[kernel, kernel], strides=[stride, stride],
                                          pads=[pad] * 4))
            return w.astype(np.float64), b.astype(np.float64)
        wa, ba = conv("x", "a", 4, 3, 3, 1, 1)
        wb, bb = conv("x", "b", 2, 3, 1, 1, 0)
        nodes += [helper.make_node("Concat", ["a", "b"], ["joined"], axis=1),
                  helper.make_node("Resize", ["joined", "", constant(np.array([1, 1, 2, 2], np.float32), "scales")],
                                   ["resized"], mode="nearest")]
        wy, by = conv("resized", "y", 4, 6, 3, 2, 1)
        joined = np.concatenate([reference_conv(ref, wa, ba, 1, [1] * 4, 1, 1),
                                 reference_conv(ref, wb, bb, 1, [0] * 4, 1, 1)], axis=1)
        ref = reference_conv(joined.repeat(2, axis=2).repeat(2, axis=3), wy, by, 2, [1] * 4, 1, 1)
        opset = 13
    else:
        nodes += [helper.make_node("Resize", ["x", "", constant(np.array([1, 1, 2, 2], np.float32), "scales")],
                                   ["resized"], mode="nearest"),
                  helper.make_node("SpaceToDepth", ["resized"], ["depth"], blocksize=2),
                  helper.make_node("Gather", ["depth", constant(np.array([0, 5, 11, -2], np.int64), "picked")],
                                   ["gathered"], axis=1),
                  helper.make_node("Tile", ["gathered", constant(np.array([1, 2, 1, 1], np.int64), "repeats")],
                                   ["tiled"]),
                  helper.make_node("Expand", ["tiled", constant(np.array([2, 1, 1, 1], np.int64), "shape")],
                                   ["expanded"]),
                  helper.make_node("Flatten", ["expanded"], ["flat"], axis=1)]
        # half_pixel, round_prefer_floor at scale 2: output i reads input i // 2.
        ref = ref.repeat(2, axis=2).repeat(2, axis=3)
        ref = reference_space_to_depth(ref, 2)[:, [0, 5, 11, 10]]
        ref = np.broadcast_to(np.tile(ref, (1, 2, 1, 1)), (2, 8, 4, 4)).reshape(2, 128)
        weight, bias = linear(rng, 128, 10)
        nodes.append(helper.make_node("Gemm", ["flat", constant(weight, "head.weight"), constant(bias, "head.bias")],
                                      ["y"], transB=1))
        ref = ref @ weight.astype(np.float64).T + bias.astype(np.float64)
        opset = 13
    return checked_model(name, nodes, x.shape, ref.shape, initializers, opset), x, ref.astype(np.float32)


# Tensor types: name: (rows, width)
TYPED = {
    "typed-mask-b4-w16": (4, 16),
}


def build_typed(name, rows, width):
    """A float input x and an int64 input ids: a compare and logic path (low <= ids < high, high varying by
    column, and its negation) selects x or x * 0.5 (Where); the mask is a bool output, and ids plus the
    negated mask cast to int64 an int64 output. Expected outputs from numpy, as ONNX defines the ops."""
    rng = np.random.default_rng(sum(map(ord, name)))
    x = rng.uniform(-1.0, 1.0, size=(rows, width)).astype(np.float32)
    ids = rng.integers(-5, 20, size=(rows, width)).astype(np.int64)
    low = np.array(3, dtype=np.int64)
    high = (8 + np.arange(width) % 5).astype(np.int64)
    half = np.array(0.5, dtype=np.float32)
    nodes = [
        helper.make_node("GreaterOrEqual", ["ids", "low"], ["at_least"]),
        helper.make_node("Less", ["ids", "high"], ["below"]),
        helper.make_node("And", ["at_least", "below"], ["band"]),
        helper.make_node("Not", ["band"], ["outside"]),
        helper.make_node("Mul", ["x", "half"], ["halved"]),
        helper.make_node("Where", ["band", "x", "halved"], ["y"]),
        helper.make_node("Cast", ["outside"], ["outside_count"], to=TensorProto.INT64),
        helper.make_node("Add", ["ids", "outside_count"], ["shifted"]),
    ]
    initializers = [numpy_helper.from_array(low, "low"), numpy_helper.from_array(high, "high"),
                    numpy_helper.from_array(half, "half")]
    graph = helper.make_graph(
        nodes, name.replace("-", "_"),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, width]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [rows, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, width]),
         helper.make_tensor_value_info("band", TensorProto.BOOL, [rows, width]),
         helper.make_tensor_value_info("shifted", TensorProto.INT64, [rows, width])], initializers)
    model = helper.make_model(graph, producer_name="tessera make_onnx_models.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    band = (ids >= low) & (ids < high)
    y = np.where(band, x, x * half)
    shifted = ids + (~band).astype(np.int64)
    return model, [("x", x), ("ids", ids)], [("y", y), ("band", band), ("shifted", shifted)]


# Recurrent layers: name: (operator, steps, batch, input size, hidden size, direction). One layer over a time-major
# x [steps, batch, input]; y is its output Y [steps, directions, batch, hidden] (every step's hidden state). Weights
# as torch initialises them (uniform within 1 / sqrt(hidden)); GRU with linear_before_reset=1, as torch exports it.
RECURRENT = {
    "lstm-s32-b2-i16-h32": ("LSTM", 32, 2, 16, 32, "forward"),
    "gru-s32-b2-i16-h32": ("GRU", 32, 2, 16, 32, "forward"),
    "lstm-bi-s8-b2-i16-h32": ("LSTM", 8, 2, 16, 32, "bidirectional"),
}


def sigmoid(values):
    return 1.0 / (1.0 + np.exp(-values))


def reference_recurrent(op, x, w, r, b, reverse):
    """One direction of ONNX's LSTM (gates i, o, f, c) or GRU (z, r, h; linear_before_reset=1) from zero states,
    in float64: every step's hidden state, [steps, batch, hidden]."""
    hidden = r.shape[-1]
    width = w.shape[0]
    wb, rb = b[:width], b[width:]
    h = np.zeros((x.shape[1], hidden))
    c = np.zeros_like(h)
    states = [None] * x.shape[0]
    for t in (reversed(range(x.shape[0])) if reverse else range(x.shape[0])):
        projected, recurrent = x[t] @ w.T + wb, h @ r.T + rb
        if op == "LSTM":
            gates = projected + recurrent
            i, o, f = (sigmoid(gates[:, k * hidden:(k + 1) * hidden]) for k in range(3))
            c = f * c + i * np.tanh(gates[:, 3 * hidden:])
            h = o * np.tanh(c)
        else:
            z = sigmoid(projected[:, :hidden] + recurrent[:, :hidden])
            reset = sigmoid(projected[:, hidden:2 * hidden] + recurrent[:, hidden:2 * hidden])
            candidate = np.tanh(projected[:, 2 * hidden:] + reset * recurrent[:, 2 * hidden:])
            h = (1 - z) * candidate + z * h
        states[t] = h
    return np.stack(states)


def build_recurrent(name, op, steps, batch, input_size, hidden, direction):
    rng = np.random.default_rng(sum(map(ord, name)))
    directions = 2 if direction == "bidirectional" else 1
    gates = 4 if op == "LSTM" else 3
    bound = 1.0 / np.sqrt(hidden)
    x = rng.uniform(-1.0, 1.0, size=(steps, batch, input_size)).astype(np.float32)
    w = rng.uniform(-bound, bound, size=(directions, gates * hidden, input_size)).astype(np.float32)
    r = rng.uniform(-bound, bound, size=(directions, gates * hidden, hidden)).astype(np.float32)
    b = rng.uniform(-bound, bound, size=(directions, 2 * gates * hidden)).astype(np.float32)
    initializers = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"), numpy_helper.from_array(b, "B")]
    attributes = {"hidden_size": hidden, "direction": direction}
    if op == "GRU":
        attributes["linear_before_reset"] = 1
    nodes = [helper.make_node(op, ["x", "W", "R", "B"], ["y"], **attributes)]
    reference = np.stack([reference_recurrent(op, x.astype(np.float64), w[d].astype(np.float64),
                                              r[d].astype(np.float64), b[d].astype(np.float64), d == 1)
                          for d in range(directions)], axis=1)
    return checked_model(name, nodes, x.shape, reference.shape, initializers, 14), x, reference.astype(np.float32)


# Text classifiers: name: (batch, tokens, vocabulary, embedding width, classes)
CLASSIFIERS = {
    "text-classifier-b4-t16-v1000-e64": (4, 16, 1000, 64, 5),
    "text-classifier-b2-t8-v20000-e32": (2, 8, 20000, 32, 3),  # a table a t16 tile splits by rows too
    "text-classifier-b1-t128-v30522-e768": (1, 128, 30522, 768, 2),  # BERT-base's token table (94 MB) on t1472
}


def build_classifier(name, batch, tokens, vocabulary, width, classes):
    """Token embeddings as torch.onnx.export writes nn.Embedding (Gather of the table by int64 ids
    [batch, tokens]), mean pooling over the tokens (ReduceMean, axes 1) and a linear head (Gemm,
    transB=1). Ids from a fixed seed span the whole vocabulary, a few negative (counting from the end,
    as ONNX Gather does); the expected logits in float64."""
    rng = np.random.default_rng(sum(map(ord, name)))
    table = rng.normal(0.0, 1.0, size=(vocabulary, width)).astype(np.float32)
    ids = rng.integers(0, vocabulary, size=(batch, tokens)).astype(np.int64)
    ids[:, 0] = [vocabulary - 1, 0, -1, -vocabulary][:batch] + [0] * max(0, batch - 4)  # both ends, and negatives
    weight, bias = linear(rng, width, classes)
    nodes = [
        helper.make_node("Gather", ["embedding.weight", "ids"], ["/embedding/Gather_output_0"], name="/embedding/Gather"),
        helper.make_node("ReduceMean", ["/embedding/Gather_output_0"], ["/ReduceMean_output_0"], axes=[1], keepdims=0,
                         name="/ReduceMean"),
        helper.make_node("Gemm", ["/ReduceMean_output_0", "head.weight", "head.bias"], ["y"], transB=1,
                         name="/head/Gemm"),
    ]
    initializers = [numpy_helper.from_array(table, "embedding.weight"), numpy_helper.from_array(weight, "head.weight"),
                    numpy_helper.from_array(bias, "head.bias")]
    graph = helper.make_graph(nodes, name.replace("-", "_"),
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [batch, tokens])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, classes])], initializers)
    model = helper.make_model(graph, producer_name="tessera make_onnx_models.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    rows = np.where(ids < 0, ids + vocabulary, ids)
    pooled = table.astype(np.float64)[rows].mean(axis=1)
    y = pooled @ weight.astype(np.float64).T + bias.astype(np.float64)
    return model, [("ids", ids)], [("y", y.astype(np.float32))]


# each table of models and the function that builds one of its models
TABLES = ((MODELS, build), (ENCODERS, build_encoder), (TORCH_ENCODERS, build_torch_encoder),
          (BERT_ENCODERS, build_bert), (CNNS, build_cnn), (MOVEMENT, build_movement), (TYPED, build_typed),
          (RECURRENT, build_recurrent), (CLASSIFIERS, build_classifier))


def write_test_data(folder, x, y):
    """FOLDER/test_data_set_0/input_N.pb and output_N.pb, as ONNX's own test data: x and y, or lists of
    (name, array) for models of several inputs or outputs."""
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    inputs = x if isinstance(x, list) else [("x", x)]
    outputs = y if isinstance(y, list) else [("y", y)]
    for kind, tensors in (("input", inputs), ("output", outputs)):
        for i, (tensor_name, tensor) in enumerate(tensors):
            with open(os.path.join(folder, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(tensor, tensor_name).SerializeToString())


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    known = [name for table, _ in TABLES for name in table]
    for name in sys.argv[2:] or known:
        if name not in known:
            sys.exit(f"unknown model '{name}'; known: {', '.join(known)}")
        model, x, y = next(builder(name, *table[name]) for table, builder in TABLES if name in table)
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        onnx.save(model, os.path.join(folder, "model.onnx"))
        write_test_data(folder, x, y)
        shape = lambda t: [list(a.shape) for _, a in t] if isinstance(t, list) else list(t.shape)
        print(f"model={os.path.join(folder, 'model.onnx')} input={shape(x)} output={shape(y)}")


if __name__ == "__main__":
    main()
