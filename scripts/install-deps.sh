#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages the build and tests need, only those missing (apt-get update runs
# once, and only when something is missing). The CUDA Toolkit itself must already be installed.
set -euo pipefail
pkgs=(meson ninja-build g++ pkg-config libunwind-dev libspdlog-dev libfmt-dev catch2 libdw-dev python3 nlohmann-json3-dev ${EXTRA_PACKAGES:-})
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cuda=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
if [ ! -f "$cuda/include/cuda.h" ]; then
  echo "error: CUDA Toolkit headers not found (set CUDA_HOME to the toolkit, e.g. /usr/local/cuda)" >&2
  exit 1
fi
