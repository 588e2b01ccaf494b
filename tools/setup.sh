#!/usr/bin/env bash
# Installs the Debian packages cprr builds against. Idempotent: packages already
# present are skipped, so CI and developers can run it on every invocation.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libsqlite3-dev libcereal-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev libcli11-dev libfmt-dev nlohmann-json3-dev libxml2-dev
  openmpi-bin slurmctld slurmd slurm-client
  python3-dev pybind11-dev python3-torch libtorch-dev python3-numpy python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}"
