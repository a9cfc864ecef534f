#!/usr/bin/env bash
# Real CNN architectures (scripts/make_onnx_models.py: torchvision's resnet18 and mobilenet_v2 written node by
# node, random weights, 64x64) compiled with the default pipeline for t1472 and run on the simulator: each
# output must match its float64 reference, the numpy expected output and, where onnxruntime-node is installed,
# ONNX Runtime, per element within rtol 1e-3 and atol 1e-4 (float32 sums in another order differ by ~1e-5
# on logits near zero).
#
#   test_onnx_cnns.sh TESSERA_BINARY SOURCE_DIR PIPELINE
set -euo pipefail
tessera=$1 source=$2 pipeline=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-cnn-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
models=(resnet18-b1-64 mobilenetv2-b1-64)
/usr/bin/python3 "$source/scripts/make_onnx_models.py" "$work/models" "${models[@]}" >/dev/null
differential=()
if command -v node >/dev/null && [ -f "$source/tools/onnxruntime/node_modules/onnxruntime-node/package.json" ]; then
  differential=(--differential)
else
  echo "note: onnxruntime-node is not installed: the ONNX Runtime comparison is skipped"
fi
for model in "${models[@]}"; do
  folder=$work/models/$model
  "$tessera" compile "$folder/model.onnx" -p "$pipeline" -o "$work/$model.tpkg" >"$work/$model.compile" 2>&1 ||
    { tail -5 "$work/$model.compile"; fail "$model does not compile"; }
  "$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "x=$folder/test_data_set_0/input_0.pb" \
    --expect "y=$folder/test_data_set_0/output_0.pb" --atol 1e-4 "${differential[@]}" >"$work/$model.out" 2>"$work/$model.err" ||
    { cat "$work/$model.out"; tail -5 "$work/$model.err"; fail "$model: run failed"; }
  grep -q "numericalTest=PASS" "$work/$model.out" || fail "$model: the float64 reference does not match"
  grep -q "expectTest=PASS" "$work/$model.out" || fail "$model: the expected outputs do not match"
  if [ ${#differential[@]} -gt 0 ]; then
    grep -q "differentialTest=PASS" "$work/$model.out" || fail "$model: ONNX Runtime's outputs do not match"
  fi
  echo "$model: $(grep -o 'device_cycles=[^ ]*' "$work/$model.out") $(grep -o 'expectedMaximumAbsoluteError=[^ ]*' "$work/$model.out")"
done
echo "PASS"
