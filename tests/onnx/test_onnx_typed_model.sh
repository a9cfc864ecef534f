#!/usr/bin/env bash
# Tensor types end to end: the generated typed-mask-b4-w16 (scripts/make_onnx_models.py: a float input and an
# int64 input through GreaterOrEqual, Less, And, Not, Where, Cast and an int64 Add) compiled for t16 and run on
# the simulator; its float, bool and int64 outputs must match numpy's (the integers and bools exactly), the
# float64 reference must pass, and the outputs written back must keep their declared types. An int64 input
# value outside int32 must be refused, naming the input and the element.
#
#   test_onnx_typed_model.sh TESSERA_BINARY SOURCE_DIR PIPELINE
set -euo pipefail
tessera=$1 source=$2 pipeline=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-typed-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
model=typed-mask-b4-w16
/usr/bin/python3 "$source/scripts/make_onnx_models.py" "$work/models" "$model" >/dev/null
data=$work/models/$model/test_data_set_0
"$tessera" compile "$work/models/$model/model.onnx" -p "$pipeline" -o "$work/$model.tpkg" >"$work/compile.out" 2>&1 ||
  { tail -5 "$work/compile.out"; fail "$model does not compile"; }
"$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "x=$data/input_0.pb" --input "ids=$data/input_1.pb" \
  --expect "y=$data/output_0.pb" --expect "band=$data/output_1.pb" --expect "shifted=$data/output_2.pb" \
  --output-dir "$work/out" >"$work/run.out" 2>"$work/run.err" ||
  { cat "$work/run.out"; tail -5 "$work/run.err"; fail "$model: run failed"; }
grep -q "numericalTest=PASS" "$work/run.out" || fail "$model: the float64 reference does not match"
grep -q "expectTest=PASS" "$work/run.out" || fail "$model: the expected outputs do not match"
grep -q "mismatches=0 " "$work/run.out" || fail "$model: an element differs"
/usr/bin/python3 - "$work/out" "$data" <<'PY' || fail "$model: the written outputs differ from numpy's or lost their types"
import sys
import numpy as np
import onnx
from onnx import numpy_helper
out, data = sys.argv[1], sys.argv[2]
for i, name in enumerate(["y", "band", "shifted"]):
    written = numpy_helper.to_array(onnx.load_tensor(f"{out}/{name}.pb"))
    expected = numpy_helper.to_array(onnx.load_tensor(f"{data}/output_{i}.pb"))
    assert written.dtype == expected.dtype, (name, written.dtype, expected.dtype)
    assert written.shape == expected.shape, (name, written.shape, expected.shape)
    if expected.dtype == np.float32:
        np.testing.assert_allclose(written, expected, rtol=1e-6, atol=0)
    else:
        assert (written == expected).all(), name
PY
# An int64 value the device cannot hold is refused at the host boundary, naming the input and the element.
/usr/bin/python3 - "$data/input_1.pb" "$work/huge.pb" <<'PY'
import sys
import onnx
from onnx import numpy_helper
ids = numpy_helper.to_array(onnx.load_tensor(sys.argv[1])).copy()
ids[1, 2] = 3_000_000_000
open(sys.argv[2], "wb").write(numpy_helper.from_array(ids, "ids").SerializeToString())
PY
if "$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "x=$data/input_0.pb" --input "ids=$work/huge.pb" \
  >"$work/huge.out" 2>&1; then
  fail "an int64 input outside int32 was accepted"
fi
grep -q "ids=$work/huge.pb: element 18 is 3000000000, outside int32" "$work/huge.out" ||
  { cat "$work/huge.out"; fail "the refusal does not name the input and the element"; }
echo "$model: $(grep -o 'device_cycles=[^ ]*' "$work/run.out") $(grep -o 'expectedMaximumAbsoluteError=[^ ]*' "$work/run.out")"
echo "PASS"
