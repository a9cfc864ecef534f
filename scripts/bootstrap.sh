#!/usr/bin/env bash
# Installs the Debian packages Tessera needs and says which; does nothing when all are present.
#   scripts/bootstrap.sh --demo   what `make demo` needs: build and run tessera
#   scripts/bootstrap.sh --test   that and what the tests and `make lint` need (the default)
#   scripts/bootstrap.sh PKG...   those packages instead (scripts/bootstrap-fuzz.sh uses this)
set -euo pipefail
build_and_run=(g++ cmake ninja-build pkg-config libboost-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev
               nlohmann-json3-dev libxxhash-dev libssl-dev libglpk-dev libsqlite3-dev
               libonnx-dev libprotobuf-dev protobuf-compiler)
# catch2: the unit tests; clang-format: make lint; chromium: the report pages' browser checks;
# slurm and jq: `tessera ab --executor slurm`'s test; libonnx-testdata and python3-onnx: ONNX's
# conformance cases and generated models.
tests=(catch2 clang-format chromium slurmctld slurmd slurm-client jq libonnx-testdata python3-onnx)
set_name=test
case "${1:-}" in
  --demo) packages=("${build_and_run[@]}"); set_name=demo; onnxruntime=false ;;
  --test | "") packages=("${build_and_run[@]}" "${tests[@]}"); onnxruntime=true ;;
  -*) echo "usage: $0 [--demo | --test | PACKAGE...]" >&2; exit 1 ;;
  *) packages=("$@"); set_name=""; onnxruntime=false ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Debian's nodejs and npm, unless a node with npm is already there (NodeSource's nodejs holds npm):
# onnxruntime-node, for `tessera run --differential` and its test.
if $onnxruntime && ! { command -v node && command -v npm; } >/dev/null; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "$(basename "$0" .sh): installing ${missing[*]}${set_name:+ (for make $set_name)}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # apt's own progress is noise; its errors still reach stderr.
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# onnxruntime-node as pinned in tools/onnxruntime/package-lock.json (1.20.1 runs on Debian 12's
# nodejs 18 and on 20), into its gitignored node_modules. The skips (ONNXRUNTIME_NODE_INSTALL_CUDA
# for 1.20, ONNXRUNTIME_NODE_INSTALL for later ones) keep its install script from downloading a
# GPU provider (which fails offline); the CPU library ships in the package.
if $onnxruntime && [ ! -f "$(dirname "$0")/../tools/onnxruntime/node_modules/onnxruntime-node/package.json" ]; then
  echo "$(basename "$0" .sh): installing onnxruntime-node in tools/onnxruntime (npm ci)"
  # Only `tessera run --differential` needs it: without the npm registry the rest still builds
  # and the onnx_differential test says it skipped, so a failure here warns and goes on.
  if ! (cd "$(dirname "$0")/../tools/onnxruntime" && ONNXRUNTIME_NODE_INSTALL=skip ONNXRUNTIME_NODE_INSTALL_CUDA=skip \
          npm ci --no-audit --no-fund --loglevel=error); then
    echo "$(basename "$0" .sh): warning: could not install onnxruntime-node (npm's error above);" \
         "'tessera run --differential' needs it: run 'npm ci' in tools/onnxruntime once the npm registry is reachable" >&2
  fi
fi
