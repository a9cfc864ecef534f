#!/usr/bin/env bash
# ResNet-18 (torchvision's architecture, random weights, 64x64; scripts/make_onnx_models.py) compiled with
# the default pipeline for t1472 and run on the simulator: its output must match the float64 expected
# output, and ONNX Runtime's where onnxruntime-node is installed.
#
#   test_onnx_resnet18.sh TESSERA_BINARY SOURCE_DIR PIPELINE
set -euo pipefail
tessera=$1 source=$2 pipeline=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-resnet18-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
model=resnet18-b1-64
/usr/bin/python3 "$source/scripts/make_onnx_models.py" "$work/models" "$model" >/dev/null
folder=$work/models/$model
"$tessera" compile "$folder/model.onnx" -p "$pipeline" -o "$work/$model.tpkg" >"$work/compile.out" 2>"$work/compile.err" ||
  { tail -5 "$work/compile.err"; fail "$model does not compile"; }
cat "$work/compile.out"
run=("$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "x=$folder/test_data_set_0/input_0.pb"
     --expect "y=$folder/test_data_set_0/output_0.pb")
if command -v node >/dev/null && [ -f "$source/tools/onnxruntime/node_modules/onnxruntime-node/package.json" ]; then
  run+=(--differential)
else
  echo "note: onnxruntime-node is not installed: the ONNX Runtime comparison is skipped"
fi
"${run[@]}" >"$work/run.out" 2>"$work/run.err" || { cat "$work/run.out"; tail -5 "$work/run.err"; fail "$model: run failed"; }
cat "$work/run.out"
grep -q "numericalTest=PASS" "$work/run.out" || fail "$model: the float64 reference does not match"
grep -q "expectTest=PASS" "$work/run.out" || fail "$model: the expected outputs do not match"
if [[ " ${run[*]} " == *" --differential "* ]]; then
  grep -q "differentialTest=PASS" "$work/run.out" || fail "$model: ONNX Runtime's outputs do not match"
fi
echo "PASS"
