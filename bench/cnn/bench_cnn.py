#!/usr/bin/python3
"""bench-cnn: CNNs (scripts/make_onnx_models.py) on t1472 with the default pipeline, side by side with their floors.

Per network: compile wall time and peak RSS, run wall time and peak RSS, device cycles, the chip floor
(the network's MACs at the target's peak over every tile, and its weight bytes at the load bandwidth
over every tile: the larger) and floor_ratio = device cycles / floor, and the errors against the
float64 expected output. Per conv layer: its MACs, the layer's floor on the whole chip, the simulated
cycles of its supersteps (compute, with the elementwise ops the planner ran in the same superstep, and
the exchange and barrier after it, which gather the next op's inputs) and their ratio. The k-th Conv node of the ONNX graph is the k-th conv op of the program
(BatchNormalization folds into it, adding none).

Beside each conv layer: a poplibs-style estimate of the same convolution on all tiles (bench-cnn-poplibs,
bench/cnn/poplibs_conv_plan.cpp: poplin's partitions charged with the transcribed vertex estimators of
bench/fidelity/poplibs_reference.cpp and poplin's exchange model; no sync, no re-layout between layers) and
ours / poplibs. Per network: the sum of those estimates and device_cycles / that sum, which must be at most
1.25 (`within_1.25x`): a generous yardstick, since device cycles also hold every other op and every barrier.

usage: bench/cnn/bench_cnn.py TESSERA SOURCE_DIR WORK_DIR [MODEL...]
"""
import json
import os
import re
import subprocess
import sys
import time

import onnx
from onnx import shape_inference

DEFAULT_MODELS = ["resnet18-b1-224", "resnet50-b1-224", "mobilenetv2-b1-224"]


def timed(command, out, err):
    """Runs `command` under /usr/bin/time -v: (exit code, wall seconds, peak RSS in MiB)."""
    with open(out, "w") as stdout, open(err, "w") as stderr:
        start = time.monotonic()
        code = subprocess.call(["/usr/bin/time", "-v"] + command, stdout=stdout, stderr=stderr)
        wall = time.monotonic() - start
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(err).read())
    return code, wall, int(rss.group(1)) / 1024 if rss else float("nan")


def field(name, path):
    found = re.findall(name + r"=([^ \n]+)", open(path).read())
    return found[-1] if found else None


def conv_layers(model_path):
    """Per Conv node in graph order: name, MACs, weight bytes (float32) and its bench-cnn-poplibs line."""
    model = shape_inference.infer_shapes(onnx.load(model_path))
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in
            list(model.graph.value_info) + list(model.graph.output) + list(model.graph.input)}
    weights = {i.name: list(i.dims) for i in model.graph.initializer}
    layers = []
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        w = weights[node.input[1]]
        out = dims[node.output[0]]
        pixels = out[0] * out[2] * (out[3] if len(out) > 3 else 1)
        taps = 1
        for k in w[2:]:
            taps *= k
        attrs = {a.name: list(a.ints) if a.ints else a.i for a in node.attribute}
        x = dims[node.input[0]]
        rank = len(w) - 2
        kernel = (w[2:] + [1, 1])[:2]
        strides = (attrs.get("strides", [1] * rank) + [1])[:2]
        dilations = (attrs.get("dilations", [1] * rank) + [1])[:2]
        pads = attrs.get("pads", [0] * (2 * rank))
        top, left, bottom, right = (pads[0], pads[1], pads[2], pads[3]) if rank == 2 else (pads[0], 0, pads[1], 0)
        field = (x[2:] + [1])[:2]
        shape = [x[0], x[1], field[0], field[1], w[0], kernel[0], kernel[1], strides[0], strides[1], dilations[0],
                 dilations[1], top, left, bottom, right, attrs.get("group", 1)]
        layers.append((node.name, pixels * w[0] * w[1] * taps, 4 * w[0] * w[1] * taps,
                       " ".join(str(v) for v in [node.name.replace(" ", "_")] + shape)))
    return layers


def poplibs_estimates(tool, layers):
    """bench-cnn-poplibs's estimate per layer: (cycles, its partition and vertex), in layer order."""
    out = subprocess.run([tool], input="\n".join(l[3] for l in layers) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    estimates = []
    for line in out:
        cycles = int(re.search(r"cycles=(\d+)", line).group(1))
        estimates.append((cycles, line.split(" ", 2)[2]))
    return estimates


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    tessera, source, work = sys.argv[1:4]
    poplibs_tool = os.path.join(os.path.dirname(os.path.abspath(tessera)), "..", "bench", "cnn", "bench-cnn-poplibs")
    models = sys.argv[4:] or DEFAULT_MODELS
    os.makedirs(work, exist_ok=True)
    subprocess.check_call(["/usr/bin/python3", os.path.join(source, "scripts/make_onnx_models.py"),
                           os.path.join(work, "models")] + models, stdout=subprocess.DEVNULL)
    target = {}
    for line in open(os.path.join(source, "configs/targets/t1472.yaml")):
        m = re.match(r"\s*(tiles|fp32_macs_per_cycle|load_bytes_per_cycle|clock_hz):\s*([0-9.e+]+)", line)
        if m:
            target[m.group(1)] = float(m.group(2))
    mac_rate = target["tiles"] * target["fp32_macs_per_cycle"]
    load_rate = target["tiles"] * target["load_bytes_per_cycle"]
    summary = []
    status = 0
    for model in models:
        folder = os.path.join(work, "models", model)
        package = os.path.join(work, model + ".tpkg")
        profile = os.path.join(work, model + ".profile.json")
        code, compile_s, compile_rss = timed(
            [tessera, "compile", os.path.join(folder, "model.onnx"), "-p",
             os.path.join(source, "configs/pipelines/default.yaml"), "-o", package],
            os.path.join(work, model + ".compile.out"), os.path.join(work, model + ".compile.err"))
        if code != 0:
            print(f"{model}: compile failed (see {work}/{model}.compile.err)")
            status = 1
            continue
        run_out = os.path.join(work, model + ".run.out")
        code, run_s, run_rss = timed(
            [tessera, "run", package, "--lock", os.path.join(work, "device.lock"), "--input",
             "x=" + os.path.join(folder, "test_data_set_0/input_0.pb"), "--expect",
             "y=" + os.path.join(folder, "test_data_set_0/output_0.pb"), "--atol", "1e-4", "--profile", profile],
            run_out, os.path.join(work, model + ".run.err"))
        if code != 0:
            print(f"{model}: run failed (see {work}/{model}.run.err)")
            status = 1
            continue
        steps = json.load(open(profile))["supersteps"]
        layers = conv_layers(os.path.join(folder, "model.onnx"))
        # conv supersteps in program order: "convN" and its "convN.reduce"
        by_op = {}
        for step in steps:
            m = re.match(r"conv(\d+)(\.reduce)?(\+.*)?$", step["label"])
            if m:
                cycles = step["compute_cycles"] + step["exchange_cycles"] + step["sync_cycles"]
                by_op[int(m.group(1))] = by_op.get(int(m.group(1)), 0) + cycles
        ops = sorted(by_op)
        device = int(field("device_cycles", run_out))
        macs = sum(l[1] for l in layers)
        weight_bytes = sum(l[2] for l in layers)
        floor = max(macs / mac_rate, weight_bytes / load_rate)
        print(f"\n{model}: per conv layer (floor: its MACs at the peak of all {int(target['tiles'])} tiles)")
        estimates = poplibs_estimates(poplibs_tool, layers)
        poplibs_sum = sum(e[0] for e in estimates)
        print(f"{'layer':<28} {'macs':>12} {'floor':>8} {'cycles':>9} {'ratio':>7} {'poplibs':>8} {'ours/poplibs':>12}  "
              f"poplibs partition and vertex")
        if len(ops) != len(layers):
            print(f"(the program has {len(ops)} conv ops, the model {len(layers)} Conv nodes: rows not matched)")
        else:
            for (name, layer_macs, _, _), op, (estimate, how) in zip(layers, ops, estimates):
                layer_floor = layer_macs / mac_rate
                print(f"{name[:28]:<28} {layer_macs:>12} {layer_floor:>8.0f} {by_op[op]:>9} "
                      f"{by_op[op] / layer_floor:>7.1f} {estimate:>8} {by_op[op] / estimate:>12.2f}  {how}")
        summary.append((model, compile_s, compile_rss, run_s, run_rss, device, macs, floor, device / floor,
                        sum(by_op.values()), field("expectTest", run_out), field("expectedMaximumAbsoluteError", run_out),
                        poplibs_sum, device / poplibs_sum))
    print(f"\n{'model':<22} {'compile_s':>9} {'compile_MiB':>11} {'run_s':>6} {'run_MiB':>8} {'device_cycles':>13} "
          f"{'macs':>12} {'chip_floor':>10} {'floor_ratio':>11} {'conv_cycles':>11} {'expect':>6} {'max_abs_err':>11} "
          f"{'poplibs_conv':>12} {'vs_poplibs':>10} {'within_1.25x':>12}")
    for row in summary:
        print(f"{row[0]:<22} {row[1]:>9.1f} {row[2]:>11.0f} {row[3]:>6.1f} {row[4]:>8.0f} {row[5]:>13} {row[6]:>12} "
              f"{row[7]:>10.0f} {row[8]:>11.1f} {row[9]:>11} {row[10]:>6} {row[11]:>11} {row[12]:>12} {row[13]:>10.2f} "
              f"{'yes' if row[13] <= 1.25 else 'no':>12}")
    sys.exit(status)


if __name__ == "__main__":
    main()
