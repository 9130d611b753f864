#!/usr/bin/env bash
# Installs the browser UI's npm packages and copies what the pages load into web/vendor/
# (the UI never loads anything from the internet), and the browser tests' packages in
# tests/ui/ and tests/onnx/. Idempotent: a second run with nothing changed only compares files.
#   scripts/web-setup.sh          web/ and tests/ui/
#   scripts/web-setup.sh --web    web/ only (serving)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v npm >/dev/null 2>&1; then
  echo "web-setup: npm is missing; install Node.js and npm (apt-get install nodejs npm)" >&2
  exit 1
fi

# npm ci when package-lock.json is there (exact versions), npm install otherwise; skipped
# when node_modules already matches the lock file.
npm_install() {
  local dir=$1
  shift
  local stamp="$dir/node_modules/.cdigits-lock"
  if [[ -f "$dir/package-lock.json" ]]; then
    if [[ -f "$stamp" ]] && cmp -s "$dir/package-lock.json" "$stamp"; then
      return 0
    fi
    echo "web-setup: npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error "$@" >/dev/null)
  else
    echo "web-setup: npm install in $dir"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$@" >/dev/null)
  fi
  cp "$dir/package-lock.json" "$stamp"
}

# Copies src to dst when dst is missing or differs.
copy() {
  local src=$1 dst=$2
  if [[ ! -f "$src" ]]; then
    echo "web-setup: $src is missing after npm install" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$dst")"
  cmp -s "$src" "$dst" 2>/dev/null || cp "$src" "$dst"
}

npm_install web
copy web/node_modules/uplot/dist/uPlot.iife.min.js web/vendor/uplot/uPlot.iife.min.js
copy web/node_modules/uplot/dist/uPlot.min.css web/vendor/uplot/uPlot.min.css
copy web/node_modules/uplot/LICENSE web/vendor/uplot/LICENSE
# The standard networks come from the server (GET /models/standard/NAME.prototxt); copies
# that older versions of this script made are removed.
rm -rf web/vendor/networks

if [[ "${1:-}" != "--web" ]]; then
  npm_install tests/ui
  # ONNX Runtime runs the exported models in the ONNX tests; its package carries the
  # CPU library for Linux, and its install script (which would fetch the GPU
  # providers from the internet) is not run
  npm_install tests/onnx --ignore-scripts
fi
