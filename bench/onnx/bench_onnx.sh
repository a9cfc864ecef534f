#!/usr/bin/env bash
# The generated ONNX encoders (scripts/make_onnx_models.py) on t1472 with the default pipeline:
# per model, compile time beside the 10 s goal, device and end-to-end cycles, peak tile bytes,
# and the largest errors against the float64 expected output and, when tools/onnxruntime is
# installed, against ONNX Runtime.
#
#   bench_onnx.sh TESSERA_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
tessera=$1 source=$2 work=$3
models=(encoder-s16-e32-h2 encoder-torch-s16-e32-h2 bert-s16-e64-h4-l2 bert-s128-e256-h4-l2)
mkdir -p "$work"
/usr/bin/python3 "$source/scripts/make_onnx_models.py" "$work/models" "${models[@]}" >/dev/null
differential=()
[ -f "$source/tools/onnxruntime/node_modules/onnxruntime-node/package.json" ] && command -v node >/dev/null &&
  differential=(--differential)
field() { grep -o "$1=[^ ]*" "$2" | tail -1 | cut -d= -f2; }  # the last (summary) line's
# The ONNX Runtime columns only when it runs: no placeholder stands in for a figure.
columns=(model target compile_ms goal_ms device_cycles end_to_end_cycles peak_tile_bytes expect_max_abs)
[ ${#differential[@]} -gt 0 ] && columns+=(ort_max_abs ort_max_rel)
row() { printf '%-26s %-6s' "$1" "$2"; shift 2; printf ' %18s' "$@"; echo; }
row "${columns[@]}"
status=0
for model in "${models[@]}"; do
  folder=$work/models/$model
  "$tessera" compile "$folder/model.onnx" -p "$source/configs/pipelines/default.yaml" \
    --target "$source/configs/targets/t1472.yaml" -o "$work/$model.tpkg" >"$work/$model.compile" 2>&1 ||
    { tail -3 "$work/$model.compile"; echo "$model: compile failed"; status=1; continue; }
  "$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --input "x=$folder/test_data_set_0/input_0.pb" \
    --expect "y=$folder/test_data_set_0/output_0.pb" "${differential[@]}" >"$work/$model.run" 2>"$work/$model.err" ||
    { tail -3 "$work/$model.err"; echo "$model: run failed"; status=1; continue; }
  values=("$model" t1472 "$(field compile_ms "$work/$model.compile")" 10000 "$(field device_cycles "$work/$model.run")"
          "$(field end_to_end_cycles "$work/$model.run")" "$(field peak_tile_bytes "$work/$model.compile")"
          "$(field expectedMaximumAbsoluteError "$work/$model.run")")
  if [ ${#differential[@]} -gt 0 ]; then
    line=$(grep "^differential output=y" "$work/$model.run")
    values+=("$(field maxAbsoluteError <(echo "$line"))" "$(field maxRelativeError <(echo "$line"))")
  fi
  row "${values[@]}"
done
[ ${#differential[@]} -gt 0 ] || echo "(ONNX Runtime columns: tools/onnxruntime is not installed; scripts/bootstrap.sh installs it)"
exit $status
