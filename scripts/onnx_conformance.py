#!/usr/bin/python3
"""ONNX's backend conformance cases (Debian's libonnx-testdata) through tessera: compile, run on the simulator, compare.

For every case folder (model.onnx + test_data_set_*/input_N.pb, output_N.pb) it compiles the model,
runs the package with each data set's inputs and checks the outputs with `--expect` (ONNX's
tolerances, rtol 1e-3 atol 1e-7). A compile that reports "not supported" counts as unsupported,
with its reason; anything else that goes wrong (a wrong number, a crash, another error) fails.
Prints one line per operator: cases, passed, failed, unsupported, then the reasons.

usage: onnx_conformance.py --tessera BIN --pipeline P --target T --work DIR [--data DIR] [--cases FILE]
                           [--require-pass] [--verbose]
--cases FILE runs only the case names listed (one a line, # comments); --require-pass then fails
unless every listed case passes (the fixed list `make test` runs).
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys

import onnx

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"


def case_operator(folder, data):
    """The operator a case tests: its node's op type; an _expanded case counts under its operator."""
    name = os.path.basename(folder)
    if name.endswith("_expanded") and os.path.isdir(os.path.join(data, name[: -len("_expanded")])):
        folder = os.path.join(data, name[: -len("_expanded")])
    try:
        model = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
    except Exception as error:  # a model python cannot load is still a case: tessera must refuse it cleanly
        return f"(unreadable: {type(error).__name__})"
    types = [node.op_type for node in model.graph.node if node.op_type != "Constant"]
    return types[0] if len(set(types)) == 1 else "+".join(sorted(set(types))) or "Constant"


def io_names(folder):
    model = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [v.name for v in model.graph.input if v.name not in initializers]
    return inputs, [v.name for v in model.graph.output]


def first_error(text):
    for line in text.splitlines():
        if line.startswith("error:") or line.startswith("internal error:"):
            return line
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def reason_of(message):
    """The part of an unsupported message that names the cause, without the file and node."""
    match = re.search(r"not supported(?: yet)?:? (.*?)(?:; supported operators:|$)", message)
    text = match.group(1) if match else message
    return re.sub(r"'[^']*'", "'…'", text)[:140]


def run_case(folder, args, work):
    name = os.path.basename(folder)
    case_work = os.path.join(work, name)
    os.makedirs(case_work, exist_ok=True)
    package = os.path.join(case_work, "model.tpkg")
    tessera = [args.tessera, "--log-level", "warn"]
    compiled = subprocess.run(tessera + ["compile", os.path.join(folder, "model.onnx"), "-p", args.pipeline, "-t",
                                         args.target, "-o", package], capture_output=True, text=True)
    if compiled.returncode != 0:
        message = first_error(compiled.stderr + compiled.stdout)
        if compiled.returncode == 1 and "not supported" in message:
            return "unsupported", reason_of(message)
        return "failed", f"compile exit {compiled.returncode}: {message}"
    inputs, outputs = io_names(folder)
    data_sets = sorted(glob.glob(os.path.join(folder, "test_data_set_*")))
    if not data_sets:
        return "failed", "no test_data_set_* folder"
    for data_set in data_sets:
        command = tessera + ["run", package, "--lock", os.path.join(work, "device.lock")]
        for i, input_name in enumerate(inputs):
            command += ["--input", f"{input_name}={os.path.join(data_set, f'input_{i}.pb')}"]
        for i, output_name in enumerate(outputs):
            command += ["--expect", f"{output_name}={os.path.join(data_set, f'output_{i}.pb')}"]
        ran = subprocess.run(command, capture_output=True, text=True)
        if ran.returncode != 0:
            line = next((l for l in ran.stdout.splitlines() if "expectTest=FAIL" in l or "numericalTest=FAIL" in l), None)
            return "failed", f"run exit {ran.returncode}: {line or first_error(ran.stderr + ran.stdout)}"
    return "passed", ""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tessera", required=True)
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--cases")
    parser.add_argument("--require-pass", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if not os.path.isdir(args.data):
        sys.exit(f"error: {args.data}: no ONNX test data; install libonnx-testdata (scripts/bootstrap.sh does)")
    folders = sorted(f for f in glob.glob(os.path.join(args.data, "test_*")) if os.path.isfile(os.path.join(f, "model.onnx")))
    if args.cases:
        with open(args.cases) as listing:
            wanted = [line.split("#")[0].strip() for line in listing]
        wanted = [name for name in wanted if name]
        known = {os.path.basename(f): f for f in folders}
        missing = [name for name in wanted if name not in known]
        if missing:
            sys.exit(f"error: {args.cases}: no such case in {args.data}: {', '.join(missing)}")
        folders = [known[name] for name in wanted]
    os.makedirs(args.work, exist_ok=True)

    table = collections.OrderedDict()
    reasons = collections.defaultdict(collections.Counter)
    failures = []
    for folder in folders:
        operator = case_operator(folder, args.data)
        outcome, why = run_case(folder, args, args.work)
        row = table.setdefault(operator, collections.Counter())
        row["cases"] += 1
        row[outcome] += 1
        if outcome == "unsupported":
            reasons[operator][why] += 1
        if outcome == "failed":
            failures.append((os.path.basename(folder), why))
        if args.verbose:
            print(f"case={os.path.basename(folder)} operator={operator} outcome={outcome} {why}", flush=True)

    width = max([len(op) for op in table] + [8])
    print(f"{'operator':<{width}} {'cases':>5} {'passed':>6} {'failed':>6} {'unsupported':>11}")
    totals = collections.Counter()
    for operator in sorted(table, key=lambda op: (-table[op]["passed"], op)):
        row = table[operator]
        totals.update(row)
        print(f"{operator:<{width}} {row['cases']:>5} {row['passed']:>6} {row['failed']:>6} {row['unsupported']:>11}")
    print(f"{'total':<{width}} {totals['cases']:>5} {totals['passed']:>6} {totals['failed']:>6} {totals['unsupported']:>11}")
    supported_ops = [op for op in table if table[op]["passed"] + table[op]["failed"] > 0]
    print(f"operators with a case compiled: {len(supported_ops)}")
    print("\nunsupported, by reason:")
    by_reason = collections.Counter()
    for counter in reasons.values():
        by_reason.update(counter)
    for why, count in by_reason.most_common():
        print(f"  {count:>4}  {why}")
    if failures:
        print("\nfailed:")
        for name, why in failures:
            print(f"  {name}: {why}")
    print(f"\nonnx_conformance cases={totals['cases']} passed={totals['passed']} failed={totals['failed']} "
          f"unsupported={totals['unsupported']}")
    if failures or (args.require_pass and totals["passed"] != totals["cases"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
