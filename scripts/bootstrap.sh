#!/usr/bin/env bash
# Installs the Debian packages Tessera builds with; does nothing when all are present.
# With arguments, installs those packages instead (scripts/bootstrap-fuzz.sh uses this).
set -euo pipefail
packages=(g++ cmake ninja-build pkg-config libboost-dev libspdlog-dev libfmt-dev
          libyaml-cpp-dev catch2 libcli11-dev nlohmann-json3-dev libxxhash-dev libssl-dev libglpk-dev libsqlite3-dev chromium
          slurmctld slurmd slurm-client jq
          libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata python3-onnx)
[ $# -eq 0 ] || packages=("$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "$(basename "$0" .sh): installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
