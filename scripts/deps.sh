#!/usr/bin/env bash
# Installs memwall's build and test dependencies from Debian 12 packages
# (as root). Idempotent: does nothing when everything is already installed.
set -euo pipefail
pkgs=(build-essential cmake pkg-config git zlib1g-dev libopenblas-dev libxxhash-dev xxhash
      libcjson-dev check clang libclang-rt-14-dev gcc-aarch64-linux-gnu
      libc6-dev-arm64-cross qemu-user python3 python3-numpy time valgrind openssl man-db
      chromium)
arm64_pkgs=(check:arm64)

missing=()
for p in "${pkgs[@]}" "${arm64_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm (for the llama.cpp peer): Debian's packages unless some node with
# npm is already there (e.g. NodeSource's nodejs, which bundles npm).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# The aarch64 unit tests link Debian's arm64 build of Check (multiarch).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
