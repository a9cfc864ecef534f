#!/usr/bin/env bash
# Embedding lookups end to end: the generated text classifiers (scripts/make_onnx_models.py: int64 token ids,
# Gather from a [vocabulary, width] table, ReduceMean over the tokens, Gemm) compiled for t16 and run on the
# simulator against numpy's float64 logits and the float64 reference. The small table is split by columns only;
# the 20000-row one does not fit a t16 tile's region per column group, so its plan splits the rows too and sums
# the row groups' partials. An id outside [-vocabulary, vocabulary) given as input is refused, naming the element.
#
#   test_onnx_embedding.sh TESSERA_BINARY SOURCE_DIR PIPELINE
set -euo pipefail
tessera=$1 source=$2 pipeline=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-embedding-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Whether each table is split by rows (the cost model picks how many row groups).
declare -A by_rows=([text-classifier-b4-t16-v1000-e64]=no [text-classifier-b2-t8-v20000-e32]=yes)
/usr/bin/python3 "$source/scripts/make_onnx_models.py" "$work/models" "${!by_rows[@]}" >/dev/null
for model in "${!by_rows[@]}"; do
  data=$work/models/$model/test_data_set_0
  "$tessera" compile "$work/models/$model/model.onnx" -p "$pipeline" -o "$work/$model.tpkg" -v >"$work/$model.compile" 2>&1 ||
    { tail -5 "$work/$model.compile"; fail "$model does not compile"; }
  plan=$(grep -o "selected block plan op=0 kind=embedding row_groups=[0-9]* column_groups=[0-9]*" "$work/$model.compile") ||
    fail "$model: no embedding plan logged"
  split=no
  [[ $plan == *"row_groups=1 "* ]] || split=yes
  [ "$split" = "${by_rows[$model]}" ] || fail "$model: split by rows should be ${by_rows[$model]}, got: $plan"
  "$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "ids=$data/input_0.pb" \
    --expect "y=$data/output_0.pb" >"$work/$model.out" 2>"$work/$model.err" ||
    { cat "$work/$model.out"; tail -5 "$work/$model.err"; fail "$model: run failed"; }
  grep -q "numericalTest=PASS" "$work/$model.out" || fail "$model: the float64 reference does not match"
  grep -q "expectTest=PASS" "$work/$model.out" || fail "$model: the expected logits do not match"
  echo "$model: ${plan#selected block plan op=0 } $(grep -o 'device_cycles=[^ ]*' "$work/$model.out")" \
    "$(grep -o 'expectedMaximumAbsoluteError=[^ ]*' "$work/$model.out")"
done

# An id past the table is refused at the host boundary (ONNX Gather errs on it), naming the input and the element.
model=text-classifier-b4-t16-v1000-e64
/usr/bin/python3 - "$work/models/$model/test_data_set_0/input_0.pb" "$work/past.pb" <<'PY'
import sys
import onnx
from onnx import numpy_helper
ids = numpy_helper.to_array(onnx.load_tensor(sys.argv[1])).copy()
ids[1, 3] = 1000
open(sys.argv[2], "wb").write(numpy_helper.from_array(ids, "ids").SerializeToString())
PY
if "$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "ids=$work/past.pb" >"$work/past.out" 2>&1; then
  fail "an id past the table was accepted"
fi
grep -q "input 'ids' element 19 is 1000, outside \[-1000, 1000)" "$work/past.out" ||
  { cat "$work/past.out"; fail "the refusal does not name the input, the element and the range"; }
echo "PASS"
