#!/usr/bin/python3
"""bench-scale: families of growing models on t1472 with the default pipeline, step by step, to each family's edge.

Per step: compile wall time and peak RSS, the planned program's copies, then (when it compiled) run wall
time and peak RSS, device cycles, the device's bytes (buffers, and the program's support memory) and the
host's tensor bytes, and run RSS over (device buffers + host tensors). Per family: the fitted growth
exponent of compile time against copies (least squares of log compile s on log copies over the steps that
compiled), and the edge: the largest step that fits, the first refused and how long the refusal took.
A family stops at its first refusal, failure or time-out. Children run under a memory limit and a deadline
(a step over either is reported as such, never as a figure).

The models are YAML (docs/models.md), written here, and for bert-base ONNX written by scripts/make_onnx_models.py:
weights come from a seed, so nothing is downloaded.

usage: bench/scale/bench_scale.py TESSERA SOURCE_DIR WORK_DIR [--family NAME]... [--steps N]
"""
import math
import os
import re
import resource
import subprocess
import sys
import time

MIB = 1024.0 * 1024.0
MEMORY_LIMIT = 6 << 30  # per child: address space, so a runaway step fails instead of swapping the machine
COMPILE_SECONDS = 240
RUN_SECONDS = 240
RSS_TARGET = 1.25
SOURCE = "."  # the source tree (main sets it): scripts/make_onnx_models.py writes the ONNX families


def mlp(name, batch, width, depth):
    """`depth` dense layers of width x width with a bias and ReLU, float32."""
    lines = [f"model: {name}", "seed: 7", "tensors:",
             f"  - {{name: x, shape: [{batch}, {width}], kind: input, scale: 1.0}}"]
    ops, previous = [], "x"
    for i in range(depth):
        lines.append(f"  - {{name: w{i}, shape: [{width}, {width}], kind: weight, scale: {1 / math.sqrt(width):.6f}}}")
        lines.append(f"  - {{name: b{i}, shape: [{width}], kind: weight, scale: 0.1}}")
        ops += [f"  - {{op: matmul, inputs: [{previous}, w{i}], output: h{i}}}",
                f"  - {{op: add, inputs: [h{i}, b{i}], output: a{i}}}",
                f"  - {{op: relu, inputs: [a{i}], output: y{i}}}"]
        previous = f"y{i}"
    return "\n".join(lines + ["ops:"] + ops + [f"outputs: [{previous}]"]) + "\n"


def encoder(name, tokens, width, layers):
    """BERT-style pre-norm encoder layers as configs/models/transformer-block.yaml: one head, FFN 4x width."""
    lines = [f"model: {name}", "seed: 9", "tensors:", f"  - {{name: x, shape: [{tokens}, {width}], kind: input, scale: 1.0}}"]
    ops, x = [], "x"
    ffn = 4 * width
    for l in range(layers):
        p = f"l{l}_"
        for norm in ("ln1", "ln2"):
            lines.append(f"  - {{name: {p}{norm}_gamma, shape: [{width}], kind: weight, scale: 1.0}}")
            lines.append(f"  - {{name: {p}{norm}_beta, shape: [{width}], kind: weight, scale: 0.1}}")
        for w in ("wq", "wk", "wv", "wo"):
            lines.append(f"  - {{name: {p}{w}, shape: [{width}, {width}], kind: weight, scale: {1 / math.sqrt(width):.6f}}}")
        lines.append(f"  - {{name: {p}bo, shape: [{width}], kind: weight, scale: 0.1}}")
        lines.append(f"  - {{name: {p}w1, shape: [{width}, {ffn}], kind: weight, scale: {1 / math.sqrt(width):.6f}}}")
        lines.append(f"  - {{name: {p}b1, shape: [{ffn}], kind: weight, scale: 0.1}}")
        lines.append(f"  - {{name: {p}w2, shape: [{ffn}, {width}], kind: weight, scale: {1 / math.sqrt(ffn):.6f}}}")
        lines.append(f"  - {{name: {p}b2, shape: [{width}], kind: weight, scale: 0.1}}")
        ops += [f"  - {{op: layer_norm, inputs: [{x}, {p}ln1_gamma, {p}ln1_beta], output: {p}n1}}",
                f"  - {{op: matmul, inputs: [{p}n1, {p}wq], output: {p}q}}",
                f"  - {{op: matmul, inputs: [{p}n1, {p}wk], output: {p}k}}",
                f"  - {{op: matmul, inputs: [{p}n1, {p}wv], output: {p}v}}",
                f"  - {{op: matmul, inputs: [{p}q, {p}k], output: {p}scores, transpose_b: true}}",
                f"  - {{op: softmax, inputs: [{p}scores], output: {p}attention, scale: {1 / math.sqrt(width):.6f}}}",
                f"  - {{op: matmul, inputs: [{p}attention, {p}v], output: {p}context}}",
                f"  - {{op: matmul, inputs: [{p}context, {p}wo], output: {p}projected}}",
                f"  - {{op: add, inputs: [{p}projected, {p}bo], output: {p}projected_b}}",
                f"  - {{op: add, inputs: [{p}projected_b, {x}], output: {p}h}}",
                f"  - {{op: layer_norm, inputs: [{p}h, {p}ln2_gamma, {p}ln2_beta], output: {p}n2}}",
                f"  - {{op: matmul, inputs: [{p}n2, {p}w1], output: {p}f1}}",
                f"  - {{op: add, inputs: [{p}f1, {p}b1], output: {p}f1_b}}",
                f"  - {{op: relu, inputs: [{p}f1_b], output: {p}f1_r}}",
                f"  - {{op: matmul, inputs: [{p}f1_r, {p}w2], output: {p}f2}}",
                f"  - {{op: add, inputs: [{p}f2, {p}b2], output: {p}f2_b}}",
                f"  - {{op: add, inputs: [{p}f2_b, {p}h], output: {p}y}}"]
        x = f"{p}y"
    return "\n".join(lines + ["ops:"] + ops + [f"outputs: [{x}]"]) + "\n"


def bert_base(name, layers):
    """`layers` BERT-base encoder layers as ONNX (scripts/make_onnx_models.py, which needs python3-onnx)."""
    sys.path.insert(0, os.path.join(SOURCE, "scripts"))
    import make_onnx_models  # pylint: disable=import-outside-toplevel
    model, _, _ = make_onnx_models.build_bert(name, 1, 128, 768, 12, 3072, layers)
    return model.SerializeToString()


def cnn(name, images, side, channels, depth):
    """`depth` 3x3 convolutions (padding 1, fused ReLU) of `channels` channels on side x side images, then a head."""
    pixels = images * side * side
    lines = [f"model: {name}", "seed: 11", "tensors:", f"  - {{name: x, shape: [{pixels}, 3], kind: input, scale: 1.0}}"]
    ops, x, inputs = [], "x", 3
    for i in range(depth):
        lines.append(f"  - {{name: w{i}, shape: [{9 * inputs}, {channels}], kind: weight, "
                     f"scale: {1 / math.sqrt(9 * inputs):.6f}}}")
        lines.append(f"  - {{name: b{i}, shape: [{channels}], kind: weight, scale: 0.1}}")
        ops.append(f"  - {{op: conv, inputs: [{x}, w{i}, b{i}], output: c{i}, batch: {images}, field: [{side}, {side}], "
                   f"kernel: [3, 3], pads: [1, 1, 1, 1], relu: true}}")
        x, inputs = f"c{i}", channels
    lines.append(f"  - {{name: head, shape: [{channels}, 10], kind: weight, scale: {1 / math.sqrt(channels):.6f}}}")
    ops.append(f"  - {{op: avg_pool, inputs: [{x}], output: g, batch: {images}, field: [{side}, {side}], "
               f"kernel: [{side}, {side}]}}")
    ops.append("  - {op: matmul, inputs: [g, head], output: y}")
    return "\n".join(lines + ["ops:"] + ops + ["outputs: [y]"]) + "\n"


# Each family: (what grows, [(step label, model text maker)]). Sizes grow geometrically and end past the
# edge, so the first refusal (and its time) is part of every full run.
FAMILIES = {
    "mlp-width-b2": ("width, batch 2, 2 layers", [(w, lambda n, w=w: mlp(n, 2, w, 2)) for w in (1024, 2048, 4096, 8192, 16384)]),
    "mlp-width-b64": ("width, batch 64, 2 layers", [(w, lambda n, w=w: mlp(n, 64, w, 2)) for w in (1024, 2048, 4096, 16384)]),
    "mlp-depth": ("layers, width 1024, batch 8", [(d, lambda n, d=d: mlp(n, 8, 1024, d)) for d in (2, 4, 8, 16, 256)]),
    "mlp-batch": ("batch, width 1024, 2 layers", [(b, lambda n, b=b: mlp(n, b, 1024, 2)) for b in (8, 64, 512, 262144)]),
    "mlp-batch-w4096": ("batch, width 4096, 2 layers", [(b, lambda n, b=b: mlp(n, b, 4096, 2)) for b in (64, 256, 1024, 65536)]),
    "bert-layers": ("layers, 128 tokens, width 256", [(l, lambda n, l=l: encoder(n, 128, 256, l)) for l in (1, 2, 4, 8, 256)]),
    "bert-embedding": ("width, 128 tokens, 1 layer", [(e, lambda n, e=e: encoder(n, 128, e, 1)) for e in (128, 256, 512, 4096)]),
    "bert-sequence": ("tokens, width 256, 1 layer", [(s, lambda n, s=s: encoder(n, s, 256, 1)) for s in (64, 128, 256, 16384)]),
    "cnn-depth": ("conv layers, 2 images 32x32, 32 channels", [(d, lambda n, d=d: cnn(n, 2, 32, 32, d)) for d in (1, 2, 4, 8, 16384)]),
    "bert-base": ("layers of BERT-base (ONNX as torch exports it: 768 wide, 12 heads, FFN 3072, 128 tokens)",
                  [(l, lambda n, l=l: bert_base(n, l)) for l in (1, 2, 4, 8, 12)]),
}
# Families whose largest steps take longer than COMPILE_SECONDS to compile.
COMPILE_SECONDS_OF = {"bert-base": 900}


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def measured(command, out_path, err_path, seconds):
    """Runs `command` under the memory limit and deadline: (exit code or 'timeout', wall s, peak RSS MiB)."""
    with open(out_path, "w") as out, open(err_path, "w") as err:
        start = time.monotonic()
        child = subprocess.Popen(command, stdout=out, stderr=err, preexec_fn=limited)
        code = None
        while code is None:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid != 0:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - start > seconds:
                child.kill()
                pid, status, usage = os.wait4(child.pid, 0)
                code = "timeout"
                break
            time.sleep(0.05)
        child.returncode = 0  # reaped here
        return code, time.monotonic() - start, usage.ru_maxrss / 1024.0


def field(name, text):
    found = re.findall(r"\b" + name + r"=([^ \n]+)", text)
    return found[-1] if found else None


def growth_exponent(points):
    """Least-squares slope of log(compile s) on log(copies)."""
    points = [(math.log(c), math.log(s)) for c, s in points if c > 0 and s > 0]
    if len(points) < 2:
        return None
    mean_x = sum(p[0] for p in points) / len(points)
    mean_y = sum(p[1] for p in points) / len(points)
    spread = sum((p[0] - mean_x) ** 2 for p in points)
    return None if spread == 0 else sum((p[0] - mean_x) * (p[1] - mean_y) for p in points) / spread


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    tessera, source, work = args[:3]
    global SOURCE
    SOURCE = source
    chosen, max_steps, rest = [], None, args[3:]
    while rest:
        flag = rest.pop(0)
        if flag == "--family" and rest:
            chosen.append(rest.pop(0))
        elif flag == "--steps" and rest:
            max_steps = int(rest.pop(0))
        else:
            sys.exit(f"bench_scale.py: unknown argument '{flag}'\n" + __doc__)
    unknown = [f for f in chosen if f not in FAMILIES]
    if unknown:
        sys.exit(f"bench_scale.py: unknown family {', '.join(unknown)}; families: {', '.join(FAMILIES)}")
    os.makedirs(work, exist_ok=True)
    pipeline = os.path.join(source, "configs/pipelines/default.yaml")
    print(f"# bench-scale on t1472 (default pipeline); each child limited to {MEMORY_LIMIT >> 30} GiB of address space, "
          f"compile {COMPILE_SECONDS} s ({', '.join(f'{f} {t} s' for f, t in COMPILE_SECONDS_OF.items())}), "
          f"run {RUN_SECONDS} s; run RSS target {RSS_TARGET}x (device buffers + host tensors)")
    # The process alone (libraries, start-up): most of a small model's RSS, beside each run's.
    _, _, floor_rss = measured([tessera, "--version"], os.path.join(work, "floor.out"), os.path.join(work, "floor.err"), 60)
    print(f"# process_floor_rss_mib={floor_rss:.1f} (tessera --version); rss/data = run RSS / (device buffers + host "
          f"tensors), less the floor in (rss-floor)/data; rss/device = run RSS / (device buffers + support memory "
          f"+ host tensors): code, vertex states and exchange descriptors are tile memory too")
    header = (f"{'family':<15} {'step':>7} {'compile':>8} {'compile_s':>9} {'compile_MiB':>11} {'copies':>9} "
              f"{'run_s':>6} {'run_MiB':>8} {'device_cycles':>13} {'device_MiB':>10} {'support_MiB':>11} "
              f"{'host_MiB':>8} {'rss/data':>8} {'(rss-floor)/data':>16} {'rss/device':>10} {'numerics':>8}")
    summary, status = [], 0
    for family in chosen or list(FAMILIES):
        what, steps = FAMILIES[family]
        print(f"\n{family}: {what}\n{header}")
        fitted, edge_fits, refused = [], None, None
        for label, make in steps[:max_steps]:
            name = f"{family}-{label}"
            text = make(name)
            model = os.path.join(work, name + (".onnx" if isinstance(text, bytes) else ".yaml"))
            with open(model, "wb" if isinstance(text, bytes) else "w") as f:
                f.write(text)
            package = os.path.join(work, name + ".tpkg")
            base = os.path.join(work, name)
            code, compile_s, compile_rss = measured(
                [tessera, "-v", "compile", model, "-p", pipeline, "-o", package], base + ".compile.out",
                base + ".compile.err", COMPILE_SECONDS_OF.get(family, COMPILE_SECONDS))
            log = open(base + ".compile.err", errors="replace").read()
            copies = field("copies", "\n".join(l for l in log.splitlines() if "planned program" in l))
            row = f"{family:<15} {label:>7} "
            if code != 0:
                does_not_fit = "does not fit" in log
                outcome = "refused" if does_not_fit else ("timeout" if code == "timeout" else f"exit {code}")
                print(row + f"{outcome:>8} {compile_s:>9.2f} {compile_rss:>11.0f} {copies or '-':>9}")
                if does_not_fit:
                    refused = (label, compile_s, "before planning" if "checked before planning" in log else "by the planner")
                else:
                    status = 1
                    refused = (label, compile_s, outcome + f" (see {base}.compile.err)")
                break
            if copies is not None:
                fitted.append((int(copies), compile_s))
            code, run_s, run_rss = measured([tessera, "run", package, "--lock", os.path.join(work, "device.lock")],
                                            base + ".run.out", base + ".run.err", RUN_SECONDS)
            out = open(base + ".run.out").read()
            device = int(field("device_bytes", out) or 0)
            support = int(field("device_support_bytes", out) or 0)
            host = int(field("host_tensor_bytes", out) or 0)
            numerics = field("numericalTest", out) or ("timeout" if code == "timeout" else f"exit {code}")
            if code != 0:
                status = 1
            ratio = run_rss * MIB / (device + host) if device + host else float("nan")
            above_floor = (run_rss - floor_rss) * MIB / (device + host) if device + host else float("nan")
            with_support = run_rss * MIB / (device + support + host) if device + support + host else float("nan")
            print(row + f"{'ok':>8} {compile_s:>9.2f} {compile_rss:>11.0f} {copies or '-':>9} {run_s:>6.1f} "
                  f"{run_rss:>8.0f} {field('device_cycles', out) or '-':>13} {device / MIB:>10.1f} "
                  f"{support / MIB:>11.1f} {host / MIB:>8.1f} {ratio:>8.2f} {above_floor:>16.2f} {with_support:>10.2f} "
                  f"{numerics:>8}")
            edge_fits = label
            os.remove(package)  # packages of the large steps are hundreds of MiB
        exponent = growth_exponent(fitted)
        summary.append((family, exponent, edge_fits, refused))
    print(f"\n{'family':<15} {'compile_s~copies^k':>18} {'largest_fits':>12} {'first_refused':>13} {'refuse_s':>8}  how")
    for family, exponent, fits, refused in summary:
        k = f"{exponent:.2f}" if exponent is not None else "-"
        if refused:
            print(f"{family:<15} {k:>18} {fits or '-':>12} {refused[0]:>13} {refused[1]:>8.2f}  {refused[2]}")
        else:
            print(f"{family:<15} {k:>18} {fits or '-':>12} {'-':>13} {'-':>8}  (no step refused)")
    sys.exit(status)


if __name__ == "__main__":
    main()
