#!/usr/bin/python3
"""Generates MLP ONNX models with weights, an input and the expected output (python3-onnx, numpy; no torch).

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


def linear(rng, fan_in, fan_out):
    bound = 1.0 / np.sqrt(fan_in)  # nn.Linear's default initialisation
    weight = rng.uniform(-bound, bound, size=(fan_out, fan_in)).astype(np.float32)
    bias = rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float32)
    return weight, bias


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
        mean = reference.mean(axis=-1, keepdims=True)
        variance = ((reference - mean) ** 2).mean(axis=-1, keepdims=True)
        reference = (reference - mean) / np.sqrt(variance + np.float64(np.float32(1e-5))) * scale + shift
        value = f"{p}/Add_1_output_0"
    if kind == "gelu-ln":
        scale = rng.uniform(0.5, 1.5, size=(width,)).astype(np.float32)
        shift = rng.uniform(-0.1, 0.1, size=(width,)).astype(np.float32)
        initializers += [numpy_helper.from_array(scale, f"layer{layer}.norm.weight"),
                         numpy_helper.from_array(shift, f"layer{layer}.norm.bias")]
        out = f"{prefix}/norm/LayerNormalization_output_0"
        nodes.append(helper.make_node("LayerNormalization", [value, f"layer{layer}.norm.weight", f"layer{layer}.norm.bias"],
                                      [out], name=f"{prefix}/norm/LayerNormalization", axis=-1, epsilon=1e-5))
        mean = reference.mean(axis=-1, keepdims=True)
        variance = ((reference - mean) ** 2).mean(axis=-1, keepdims=True)
        reference = (reference - mean) / np.sqrt(variance + np.float64(np.float32(1e-5))) * scale + shift
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
        shifted = np.exp(reference - reference.max(axis=-1, keepdims=True))
        reference = shifted / shifted.sum(axis=-1, keepdims=True)
    elif head == "sigmoid":
        nodes.append(helper.make_node("Sigmoid", [value], ["y"], name="/Sigmoid"))
        reference = 1.0 / (1.0 + np.exp(-reference))
    else:
        nodes.append(helper.make_node("Identity", [value], ["y"], name="/Identity"))
    graph = helper.make_graph(nodes, name.replace("-", "_"),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_dims)], initializers)
    model = helper.make_model(graph, producer_name="tessera make_onnx_models.py",
                              opset_imports=[helper.make_opsetid("", 17 if activation == "gelu-ln" else 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
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
        mean = reference.mean(axis=-1, keepdims=True)
        variance = ((reference - mean) ** 2).mean(axis=-1, keepdims=True)
        return out, (reference - mean) / np.sqrt(variance + np.float64(np.float32(1e-5))) * scale + shift

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
        shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
        context = (shifted / shifted.sum(axis=-1, keepdims=True)) @ projected["v"][1]
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
    graph = helper.make_graph(nodes, name.replace("-", "_"),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, width])], initializers)
    model = helper.make_model(graph, producer_name="tessera make_onnx_models.py",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, x, reference.astype(np.float32)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS) + list(ENCODERS)
    for name in names:
        if name not in MODELS and name not in ENCODERS:
            sys.exit(f"unknown model '{name}'; known: {', '.join(list(MODELS) + list(ENCODERS))}")
        model, x, y = build(name, *MODELS[name]) if name in MODELS else build_encoder(name, *ENCODERS[name])
        folder = os.path.join(out, name)
        os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
        onnx.save(model, os.path.join(folder, "model.onnx"))
        for file, tensor, tensor_name in (("input_0.pb", x, "x"), ("output_0.pb", y, "y")):
            with open(os.path.join(folder, "test_data_set_0", file), "wb") as f:
                f.write(numpy_helper.from_array(tensor, tensor_name).SerializeToString())
        print(f"model={os.path.join(folder, 'model.onnx')} input={list(x.shape)} output={list(y.shape)}")


if __name__ == "__main__":
    main()
