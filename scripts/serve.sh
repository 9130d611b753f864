#!/usr/bin/env bash
# Install what is missing, build, put Fashion-MNIST into the data folder once (as
# class folders of PNGs, ready to pick in the new-dataset form) and start the server.
#   CDIGITS_DATA   data folder (default ./data)
#   CDIGITS_PORT   port (default 5000); CDIGITS_BIND address (default 127.0.0.1)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >build.configure.log 2>&1 \
  || { cat build.configure.log; exit 1; }
grep -E '^-- cdigits:' build.configure.log
cmake --build build -j"$(nproc)" >build.log 2>&1 || { grep -E 'error' build.log | head -40; exit 1; }

scripts/web-setup.sh --web || { echo "serve: installing the web UI's npm packages failed"; exit 1; }

data=${CDIGITS_DATA:-$(pwd)/data}
mkdir -p "$data"
fm=/usr/share/datasets/fashion-mnist
names=tshirt_top,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,ankle_boot
for split in train t10k; do
  out="$data/fashion-mnist/$([[ $split == t10k ]] && echo test || echo train)"
  if [[ ! -f "$out/.complete" ]]; then
    echo "serve: importing Fashion-MNIST $split into $out"
    rm -rf "$out"
    build/cdigits-worker import-idx --images "$fm/$split-images-idx3-ubyte.gz" \
      --labels "$fm/$split-labels-idx1-ubyte.gz" --out "$out" --labels-names "$names" >/dev/null
    touch "$out/.complete"
  fi
done

port=${CDIGITS_PORT:-5000}
bind=${CDIGITS_BIND:-127.0.0.1}
echo "serve: cdigits at http://$bind:$port/ (data in $data; Fashion-MNIST in $data/fashion-mnist)"
exec build/cdigits serve --bind "$bind" --port "$port" --data "$data" --data-root "$data"
