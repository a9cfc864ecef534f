#!/usr/bin/python3
"""Exports the torch modules whose ONNX patterns scripts/make_onnx_models.py copies (needs python3-torch 1.13).

Each model goes to OUT/<name>/model.onnx with test_data_set_0/input_0.pb and output_0.pb (torch's own output),
laid out as make_onnx_models.py lays out its model of the same name, but with torch's default-initialised weights
(so torch also writes Identity nodes for the parameters equal to earlier ones: zero biases, unit norm weights).
Export: opset 17, do_constant_folding, static shapes, eval mode with grad enabled, since under torch.no_grad()
nn.TransformerEncoderLayer takes its fused fast path (aten::_transformer_encoder_layer_fwd), which does not export.

usage: scripts/export_torch_models.py OUT [NAME...]   (default: both models; exit 77 when torch is not installed)
"""
import math
import os
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: torch is not installed (apt-get install python3-torch)")
    sys.exit(77)
import onnx

from make_onnx_models import write_test_data


class BertLayer(nn.Module):
    """A post-norm encoder layer written as Hugging Face's BERT writes it (erf GELU, LayerNorm eps 1e-12)."""

    def __init__(self, width, heads, ffn):
        super().__init__()
        self.heads, self.head = heads, width // heads
        self.query, self.key, self.value = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)
        self.dense, self.ln1 = nn.Linear(width, width), nn.LayerNorm(width, eps=1e-12)
        self.inter, self.act, self.out = nn.Linear(width, ffn), nn.GELU(), nn.Linear(ffn, width)
        self.ln2 = nn.LayerNorm(width, eps=1e-12)

    def forward(self, x):
        batch, tokens, width = x.shape
        q, k, v = (f(x).view(batch, tokens, self.heads, self.head).permute(0, 2, 1, 3)
                   for f in (self.query, self.key, self.value))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.head), dim=-1)
        context = (probs @ v).permute(0, 2, 1, 3).contiguous().view(batch, tokens, width)
        h = self.ln1(self.dense(context) + x)
        return self.ln2(self.out(self.act(self.inter(h))) + h)


class Bert(nn.Module):
    def __init__(self, width, heads, ffn, layers):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer(width, heads, ffn) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


# name: (module, input dims); the names and shapes of make_onnx_models.py's TORCH_ENCODERS and BERT_ENCODERS.
def modules():
    return {
        "encoder-torch-s16-e32-h2": (nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, activation="gelu",
                                                                batch_first=True), [1, 16, 32]),
        "bert-s16-e64-h4-l2": (Bert(64, 4, 128, 2), [1, 16, 64]),
    }


def export(module, x, path):
    module.eval()
    with torch.enable_grad():  # keeps nn.TransformerEncoderLayer off its fast path, in export and in the output
        torch.onnx.export(module, (x,), path, opset_version=17, do_constant_folding=True, input_names=["x"],
                          output_names=["y"])
        return module(x).detach()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    torch.manual_seed(0)
    table = modules()
    for name in sys.argv[2:] or list(table):
        if name not in table:
            sys.exit(f"unknown model '{name}'; known: {', '.join(table)}")
        module, dims = table[name]
        folder = os.path.join(sys.argv[1], name)
        os.makedirs(folder, exist_ok=True)
        x = torch.rand(dims) * 2 - 1
        y = export(module, x, os.path.join(folder, "model.onnx"))
        write_test_data(folder, x.numpy(), y.numpy())
        ops = [node.op_type for node in onnx.load(os.path.join(folder, "model.onnx")).graph.node]
        print(f"model={os.path.join(folder, 'model.onnx')} input={dims} output={list(y.shape)} nodes={len(ops)}")


if __name__ == "__main__":
    main()
