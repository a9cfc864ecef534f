#!/usr/bin/python3
"""ONNX's backend conformance cases (Debian's libonnx-testdata) through tessera: compile, run on the simulator, compare.

For every case folder (model.onnx + test_data_set_*/input_N.pb, output_N.pb) it compiles the model,
runs the package with each data set's inputs and checks the outputs with `--expect` (ONNX's
tolerances, rtol 1e-3 atol 1e-7). A compile that reports "not supported" counts as unsupported,
with its reason; anything else that goes wrong (a wrong number, a crash, another error) fails.
When the compiler refuses because an op needs a constant that is a graph input (ONNX's tests give
reduction axes, Reshape shapes, Slice bounds as inputs) it names the input and suggests
`--input-value NAME=VALUES`: the case is then compiled again with that input frozen to the data
set's value (and run without it), and counted among the passed as "passed with frozen inputs".
Prints one line per operator: cases, passed (frozen among them), failed, unsupported, then the reasons.

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


FREEZE = re.compile(r"--input-value (\S+?)=VALUES")


def compile_case(folder, args, package, frozen):
    """Compiles with `frozen` ({input: file}) frozen; (returncode, first error)."""
    command = [args.tessera, "--log-level", "warn", "compile", os.path.join(folder, "model.onnx"), "-p",
               args.pipeline, "-t", args.target, "-o", package]
    for input_name, path in sorted(frozen.items()):
        command += ["--input-value", f"{input_name}={path}"]
    compiled = subprocess.run(command, capture_output=True, text=True)
    return compiled.returncode, (first_error(compiled.stderr + compiled.stdout) if compiled.returncode else "")


def run_case(folder, args, work):
    """(outcome, reason, frozen input names)."""
    name = os.path.basename(folder)
    case_work = os.path.join(work, name)
    os.makedirs(case_work, exist_ok=True)
    package = os.path.join(case_work, "model.tpkg")
    tessera = [args.tessera, "--log-level", "warn"]
    inputs, outputs = io_names(folder)
    data_sets = sorted(glob.glob(os.path.join(folder, "test_data_set_*")))
    if not data_sets:
        return "failed", "no test_data_set_* folder", []
    # Inputs the compiler asks to freeze, frozen to the first data set's values.
    frozen = {}
    while True:
        status, message = compile_case(folder, args, package, frozen)
        wanted = FREEZE.search(message) if status == 1 and "not supported" in message else None
        if not wanted or wanted.group(1) in frozen or wanted.group(1) not in inputs:
            break
        frozen[wanted.group(1)] = os.path.join(data_sets[0], f"input_{inputs.index(wanted.group(1))}.pb")
    if status != 0:
        if status == 1 and "not supported" in message:
            return "unsupported", reason_of(message), sorted(frozen)
        return "failed", f"compile exit {status}: {message}", sorted(frozen)
    compiled_for = data_sets[0]
    for data_set in data_sets:
        if frozen and not same_frozen_values(frozen, inputs, compiled_for, data_set):
            # Another data set freezes other values: its own compile.
            frozen = {n: os.path.join(data_set, f"input_{inputs.index(n)}.pb") for n in frozen}
            status, message = compile_case(folder, args, package, frozen)
            if status != 0:
                return "failed", f"compile exit {status} for {os.path.basename(data_set)}: {message}", sorted(frozen)
            compiled_for = data_set
        command = tessera + ["run", package, "--lock", os.path.join(work, "device.lock")]
        for i, input_name in enumerate(inputs):
            if input_name in frozen:
                continue
            command += ["--input", f"{input_name}={os.path.join(data_set, f'input_{i}.pb')}"]
        for i, output_name in enumerate(outputs):
            command += ["--expect", f"{output_name}={os.path.join(data_set, f'output_{i}.pb')}"]
        ran = subprocess.run(command, capture_output=True, text=True)
        if ran.returncode != 0:
            line = next((l for l in ran.stdout.splitlines() if "expectTest=FAIL" in l or "numericalTest=FAIL" in l), None)
            return "failed", f"run exit {ran.returncode}: {line or first_error(ran.stderr + ran.stdout)}", sorted(frozen)
    return "passed", "", sorted(frozen)


def same_frozen_values(frozen, inputs, one, other):
    """Whether two data sets give the frozen inputs the same bytes."""
    for input_name in frozen:
        file = f"input_{inputs.index(input_name)}.pb"
        with open(os.path.join(one, file), "rb") as a, open(os.path.join(other, file), "rb") as b:
            if a.read() != b.read():
                return False
    return True


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
        outcome, why, frozen = run_case(folder, args, args.work)
        row = table.setdefault(operator, collections.Counter())
        row["cases"] += 1
        row[outcome] += 1
        if outcome == "passed" and frozen:
            row["frozen"] += 1
        if outcome == "unsupported":
            reasons[operator][why] += 1
        if outcome == "failed":
            failures.append((os.path.basename(folder), why))
        if args.verbose:
            frozen_text = f" frozen={','.join(frozen)}" if frozen else ""
            print(f"case={os.path.basename(folder)} operator={operator} outcome={outcome}{frozen_text} {why}", flush=True)

    width = max([len(op) for op in table] + [8])
    print(f"{'operator':<{width}} {'cases':>5} {'passed':>6} {'frozen':>6} {'failed':>6} {'unsupported':>11}")
    totals = collections.Counter()
    for operator in sorted(table, key=lambda op: (-table[op]["passed"], op)):
        row = table[operator]
        totals.update(row)
        print(f"{operator:<{width}} {row['cases']:>5} {row['passed']:>6} {row['frozen']:>6} {row['failed']:>6} "
              f"{row['unsupported']:>11}")
    print(f"{'total':<{width}} {totals['cases']:>5} {totals['passed']:>6} {totals['frozen']:>6} {totals['failed']:>6} "
          f"{totals['unsupported']:>11}")
    print(f"passed with frozen inputs (--input-value): {totals['frozen']} of the {totals['passed']} passed")
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
    print(f"\nonnx_conformance cases={totals['cases']} passed={totals['passed']} "
          f"passed_with_frozen_inputs={totals['frozen']} failed={totals['failed']} unsupported={totals['unsupported']}")
    if failures or (args.require_pass and totals["passed"] != totals["cases"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
