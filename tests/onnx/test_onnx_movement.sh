#!/usr/bin/env bash
# Data movement on computed tensors (scripts/make_onnx_models.py: mlp-concat-branches, movement-pad-slice,
# movement-resize-gather, movement-conv-concat) compiled for t16 and run on the simulator: each output must match its float64
# reference and the numpy expected output (and ONNX Runtime where onnxruntime-node is installed), and each
# data-movement node must be planned as a gather.
#
#   test_onnx_movement.sh TESSERA_BINARY SOURCE_DIR PIPELINE
set -euo pipefail
tessera=$1 source=$2 pipeline=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-movement-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
models=(mlp-concat-branches movement-pad-slice movement-resize-gather movement-conv-concat)
# The gathers each model's data-movement nodes become: a chain of them is one (each element moved once);
# movement-pad-slice's Pad..Reshape chain before its MatMul is one, its Split and Concat after it another.
declare -A gathers=([mlp-concat-branches]=1 [movement-pad-slice]=2 [movement-resize-gather]=1 [movement-conv-concat]=1)
/usr/bin/python3 "$source/scripts/make_onnx_models.py" "$work/models" "${models[@]}" >/dev/null
differential=()
if command -v node >/dev/null && [ -f "$source/tools/onnxruntime/node_modules/onnxruntime-node/package.json" ]; then
  differential=(--differential)
else
  echo "note: onnxruntime-node is not installed: the ONNX Runtime comparison is skipped"
fi
for model in "${models[@]}"; do
  folder=$work/models/$model
  "$tessera" compile "$folder/model.onnx" -p "$pipeline" -o "$work/$model.tpkg" -v >"$work/$model.compile" 2>&1 ||
    { tail -5 "$work/$model.compile"; fail "$model does not compile"; }
  planned=$(grep -c "selected block plan op=[0-9]* kind=gather" "$work/$model.compile" || true)
  [ "$planned" -eq "${gathers[$model]}" ] || fail "$model: $planned gathers planned, expected ${gathers[$model]}"
  "$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "x=$folder/test_data_set_0/input_0.pb" \
    --expect "y=$folder/test_data_set_0/output_0.pb" "${differential[@]}" >"$work/$model.out" 2>"$work/$model.err" ||
    { cat "$work/$model.out"; tail -5 "$work/$model.err"; fail "$model: run failed"; }
  grep -q "numericalTest=PASS" "$work/$model.out" || fail "$model: the float64 reference does not match"
  grep -q "expectTest=PASS" "$work/$model.out" || fail "$model: the expected outputs do not match"
  if [ ${#differential[@]} -gt 0 ]; then
    grep -q "differentialTest=PASS" "$work/$model.out" || fail "$model: ONNX Runtime's outputs do not match"
  fi
  echo "$model: gathers=$planned $(grep -o 'device_cycles=[^ ]*' "$work/$model.out") $(grep -o 'expectedMaximumAbsoluteError=[^ ]*' "$work/$model.out")"
done
echo "PASS"
