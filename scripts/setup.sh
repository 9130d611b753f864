#!/usr/bin/env bash
# Install what cdigits needs to build, test and serve, with apt-get (Debian 12).
# Only missing packages are installed; a machine that has them all is left alone.
#   scripts/setup.sh            build and run
#   scripts/setup.sh --test     also what the tests need (clang for fuzzing, curl, ...)
set -euo pipefail

packages=(build-essential cmake pkg-config
          libopenblas-dev libxsmm-dev libjansson-dev libpng-dev libjpeg62-turbo-dev
          libmicrohttpd-dev libsqlite3-dev libsodium-dev zlib1g-dev libbz2-dev libstb-dev
          libprotobuf-c-dev protobuf-c-compiler
          dataset-fashion-mnist curl python3 ca-certificates)
# the browser UI: Node.js and npm install its packages (scripts/web-setup.sh); npm is
# looked for as a command because some Node.js builds bundle their own
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
if [[ "${1:-}" == "--test" ]]; then
  # python3-torch: the reference side of the GPU rehearsal's benchmark table (stage 3);
  # prometheus: promtool checks the exposition of GET /metrics (tests/shell/prometheus.sh);
  # python3-protobuf: tests/shell/tensorboard.sh reads the TensorBoard events files;
  # python3-onnx and libonnx-testdata: ONNX's checker and its operator tests check the
  # ONNX export and import;
  # slurmctld, slurmd, slurm-client, munge: the single-host cluster the Slurm tests start
  # (scripts/slurm-local.sh); openmpi-bin, libopenmpi-dev: training ranks under mpirun
  packages+=(clang libclang-rt-14-dev wrk chromium python3-torch prometheus python3-protobuf
             python3-onnx libonnx-testdata
             slurmctld slurmd slurm-client munge openmpi-bin libopenmpi-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: these packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
