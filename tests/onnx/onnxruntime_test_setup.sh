# Sourced by the ONNX Runtime tests: skips (77) without node or tools/onnxruntime's
# onnxruntime-node, makes a work folder removed on exit ($work) and defines fail.
command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/bootstrap.sh installs nodejs and npm)"; exit 77; }
[ -f "$source/tools/onnxruntime/node_modules/onnxruntime-node/package.json" ] ||
  { echo "SKIP: onnxruntime-node is not installed in $source/tools/onnxruntime (run scripts/bootstrap.sh)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-onnxruntime-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
