#!/usr/bin/env bash
# Installs the Debian packages olympus builds and tests with, if any is missing.
set -euo pipefail
# Extra package names may be given as arguments (make bench adds its peers).
pkgs=(build-essential libopenblas-dev libsleef-dev libfftw3-dev python3-dev python3-numpy python3-scipy python3-pytest
      libopenmpi-dev openmpi-bin "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
