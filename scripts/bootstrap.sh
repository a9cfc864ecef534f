#!/usr/bin/env bash
# Installs the Debian packages Tessera builds with; does nothing when all are present.
# With arguments, installs those packages instead (scripts/bootstrap-fuzz.sh uses this).
set -euo pipefail
packages=(g++ cmake ninja-build pkg-config clang-format libboost-dev libspdlog-dev libfmt-dev
          libyaml-cpp-dev catch2 libcli11-dev nlohmann-json3-dev libxxhash-dev libssl-dev libglpk-dev libsqlite3-dev chromium
          slurmctld slurmd slurm-client jq
          libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata python3-onnx)
onnxruntime=true  # tools/onnxruntime: ONNX Runtime for `tessera run --differential`
[ $# -eq 0 ] || { packages=("$@"); onnxruntime=false; }
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Debian's nodejs and npm, unless a node with npm is already there (NodeSource's nodejs holds npm).
if $onnxruntime && ! { command -v node && command -v npm; } >/dev/null; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "$(basename "$0" .sh): installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# onnxruntime-node as pinned in tools/onnxruntime/package-lock.json (1.20.1 runs on Debian 12's
# nodejs 18 and on 20), into its gitignored node_modules. The skips (ONNXRUNTIME_NODE_INSTALL_CUDA
# for 1.20, ONNXRUNTIME_NODE_INSTALL for later ones) keep its install script from downloading a
# GPU provider (which fails offline); the CPU library ships in the package.
if $onnxruntime && [ ! -f "$(dirname "$0")/../tools/onnxruntime/node_modules/onnxruntime-node/package.json" ]; then
  echo "$(basename "$0" .sh): installing onnxruntime-node in tools/onnxruntime"
  # Only `tessera run --differential` needs it: without the npm registry the rest still builds
  # and the onnx_differential test says it skipped, so a failure here warns and goes on.
  if ! (cd "$(dirname "$0")/../tools/onnxruntime" && ONNXRUNTIME_NODE_INSTALL=skip ONNXRUNTIME_NODE_INSTALL_CUDA=skip \
          npm ci --no-audit --no-fund --loglevel=error); then
    echo "$(basename "$0" .sh): warning: could not install onnxruntime-node (npm's error above);" \
         "'tessera run --differential' needs it: run 'npm ci' in tools/onnxruntime once the npm registry is reachable" >&2
  fi
fi
