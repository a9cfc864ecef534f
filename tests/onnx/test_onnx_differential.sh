#!/usr/bin/env bash
# ONNX Runtime as a differential reference: generated MLPs, encoders, a small CNN, unrolled LSTM and GRU layers and a
# text classifier with token embeddings (scripts/make_onnx_models.py) compiled for t16, run with their input, checked
# against their float64 expected outputs (--expect) and against ONNX Runtime (--differential). Also checks the
# comparison can fail (zero tolerances).
# Skips (77) only when node or tools/onnxruntime's onnxruntime-node is absent.
#
#   test_onnx_differential.sh TESSERA_BINARY SOURCE_DIR PIPELINE
set -euo pipefail
tessera=$1 source=$2 pipeline=$3
# shellcheck source=onnxruntime_test_setup.sh
source "$(dirname "$0")/onnxruntime_test_setup.sh"

models=(mlp-b2-w64-n3 mlp-b4-w96-gelu-ln mlp-b8-w64-tanh mlp-b4-w96-gelu-ln-spelled encoder-s16-e32-h2
        encoder-torch-s16-e32-h2 bert-s16-e64-h4-l2 cnn-tiny-b2 lstm-s32-b2-i16-h32 gru-s32-b2-i16-h32
        lstm-bi-s8-b2-i16-h32 text-classifier-b4-t16-v1000-e64)
# The graph input of each model that is not called x: the classifier reads int64 token ids.
declare -A input_name=([text-classifier-b4-t16-v1000-e64]=ids)
/usr/bin/python3 "$source/scripts/make_onnx_models.py" "$work/models" "${models[@]}"
for model in "${models[@]}"; do
  folder=$work/models/$model
  "$tessera" compile "$folder/model.onnx" -p "$pipeline" -o "$work/$model.tpkg" >"$work/$model.compile" 2>&1 ||
    { tail -5 "$work/$model.compile"; fail "$model does not compile"; }
  run=("$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "${input_name[$model]:-x}=$folder/test_data_set_0/input_0.pb"
       --expect "y=$folder/test_data_set_0/output_0.pb" --differential)
  "${run[@]}" >"$work/$model.out" 2>"$work/$model.err" || { cat "$work/$model.out"; tail -5 "$work/$model.err"; fail "$model: run failed"; }
  grep -q "expectTest=PASS" "$work/$model.out" || fail "$model: the expected outputs do not match"
  grep -q "differentialTest=PASS" "$work/$model.out" || fail "$model: ONNX Runtime's outputs do not match"
  line=$(grep "^differential output=y " "$work/$model.out") || fail "$model: no differential line for output y"
  echo "$model: $line $(grep -o 'differentialReference=[^ ]*' "$work/$model.out")"
done

# The comparison can fail: GELU's erf and LayerNorm round differently in ONNX Runtime, so at zero
# tolerance the device's outputs are not all equal to its.
model=mlp-b4-w96-gelu-ln
abs_error=$(grep "^differential output=y " "$work/$model.out" | sed 's/.*maxAbsoluteError=\([^ ]*\).*/\1/')
if [ "$abs_error" != 0 ]; then
  set +e
  "$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "x=$work/models/$model/test_data_set_0/input_0.pb" \
    --differential --atol 0 --rtol 0 >"$work/strict.out" 2>"$work/strict.err"
  code=$?
  set -e
  [ $code -eq 1 ] || fail "a differential run beyond tolerance exits $code, not 1"
  grep -q "differentialTest=FAIL" "$work/strict.out" || fail "a differential run beyond tolerance does not print differentialTest=FAIL"
fi

# --float16-weights: the encoder's matmul weights and biases stored as float16. ONNX Runtime keeps
# them float32, so the differential widens atol by the float16 share of the output's scale and
# says so; the device must still match both references.
model=bert-s16-e64-h4-l2
folder=$work/models/$model
"$tessera" -v compile "$folder/model.onnx" -p "$pipeline" -o "$work/f16.tpkg" --float16-weights >"$work/f16.compile" 2>&1 ||
  { tail -5 "$work/f16.compile"; fail "$model does not compile with --float16-weights"; }
stored=$(grep -o "stored weights as float16 weights=[0-9]*" "$work/f16.compile" | sed 's/.*=//')
[ "${stored:-0}" -gt 0 ] || fail "$model: --float16-weights stored no weight as float16"
"$tessera" run "$work/f16.tpkg" --lock "$work/device.lock" --input "x=$folder/test_data_set_0/input_0.pb" \
  --differential >"$work/f16.out" 2>"$work/f16.err" || { cat "$work/f16.out"; tail -5 "$work/f16.err"; fail "$model: float16 run failed"; }
grep -q "numericalTest=PASS" "$work/f16.out" || fail "$model: float16 weights miss the float64 reference"
grep -q "differentialTest=PASS" "$work/f16.out" || fail "$model: float16 weights miss ONNX Runtime"
atol=$(grep "^differential output=y " "$work/f16.out" | sed 's/.* atol=\([^ ]*\).*/\1/')
f32_atol=$(grep "^differential output=y " "$work/$model.out" | sed 's/.* atol=\([^ ]*\).*/\1/')
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$atol') > float('$f32_atol') else 1)" ||
  fail "$model: the float16 differential's atol ($atol) is not wider than float32's ($f32_atol)"
cycles16=$(grep -o "device_cycles=[0-9]*" "$work/f16.out" | sed 's/.*=//')
cycles32=$(grep -o "device_cycles=[0-9]*" "$work/$model.out" | sed 's/.*=//')
echo "$model --float16-weights: weights=$stored device_cycles=$cycles16 (float32: $cycles32) $(grep '^differential output=y ' "$work/f16.out")"

# A YAML package has no ONNX model to give ONNX Runtime: a clear error, exit 1.
set +e
"$tessera" compile "$source/configs/models/mlp-small.yaml" -p "$pipeline" -o "$work/yaml.tpkg" >/dev/null 2>&1
"$tessera" run "$work/yaml.tpkg" --lock "$work/device.lock" --differential >"$work/yaml.out" 2>"$work/yaml.err"
code=$?
set -e
[ $code -eq 1 ] || fail "--differential on a YAML package exits $code, not 1"
grep -q "ONNX Runtime runs ONNX models only" "$work/yaml.err" || { cat "$work/yaml.err"; fail "--differential on a YAML package: no clear error"; }
echo "PASS"
