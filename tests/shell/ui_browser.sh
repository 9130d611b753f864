#!/usr/bin/env bash
# Browser tests of the web UI (tests/ui/ui.test.mjs) in Debian's Chromium through
# playwright-core, against the real server: build/cdigits serve on a free loopback port
# with a fresh data folder and two data roots of generated PNGs: 3 classes of 28x28 gray
# images, 40 each, 48 32x32 images with label images for a segmentation dataset
# (tests/shell/make_generic.py shapes), and 24 48x48 images with KITTI labels for a
# detection dataset (make_generic.py boxes) beside square.png, a white square on black
# that tests/shell/detect_known.prototxt finds. Screenshots of every page go to
# $CDIGITS_BUILD_DIR/ui-screenshots.
# Skips (tests/shell/skip.bash) only when node or chromium is not installed.
#   CDIGITS_BUILD_DIR, CDIGITS_SOURCE_DIR   set by ctest
#   CHROMIUM                                the browser (default /usr/bin/chromium)
set -u
SRC=${CDIGITS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${CDIGITS_BUILD_DIR:-$SRC/build}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

. "$(dirname "$0")/skip.bash"
command -v node >/dev/null 2>&1 || skip_test "node is not installed (apt-get install nodejs npm)"
[ -x "$CHROMIUM" ] || skip_test "$CHROMIUM is not installed (apt-get install chromium)"

fail() {
  echo "FAIL $*"
  echo "ui_browser: 0 passed, 1 failed"
  exit 1
}

[ -x "$BUILD/cdigits" ] || fail "$BUILD/cdigits is not built (cmake --build $BUILD --target cdigits cdigits-worker)"
[ -x "$BUILD/cdigits-worker" ] || fail "$BUILD/cdigits-worker is not built"
"$SRC/scripts/web-setup.sh" || fail "scripts/web-setup.sh could not install the UI's npm packages"

T=$(mktemp -d "${TMPDIR:-/tmp}/cdigits-ui-XXXXXX")
SRV_PID=""
cleanup() {
  if [ -n "$SRV_PID" ]; then
    kill -TERM "$SRV_PID" 2>/dev/null
    wait "$SRV_PID" 2>/dev/null
  fi
  # workers of this test's data folder that outlived the server
  local pid
  for pid in $(ps -eo pid= 2>/dev/null); do
    if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$T/"; then
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  rm -rf "$T"
}
trap cleanup EXIT

python3 "$SRC/tests/ui/make_images.py" "$T/images" --classes 3 --per-class 40 --size 28 || fail "cannot write the test images"
# a segmentation dataset's images and label images, in a second data root
python3 "$SRC/tests/shell/make_generic.py" shapes "$T/generic/shapes" --count 48 --size 32 --seed 3 ||
  fail "cannot write the segmentation images"
python3 "$SRC/tests/shell/make_generic.py" boxes "$T/generic/boxes" --count 24 --size 48 --seed 5 ||
  fail "cannot write the detection images"
python3 -c 'import struct, sys, zlib
raw = b"".join(b"\0" + bytes(v for x in range(48) for v in ((255,) * 3 if 8 <= x < 40 and 8 <= y < 40 else (0,) * 3))
               for y in range(48))
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 48, 48, 8, 2, 0, 0, 0)) +
                              chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))' "$T/generic/boxes/square.png" ||
  fail "cannot write square.png"

"$BUILD/cdigits" serve --port 0 --port-file "$T/port" --data "$T/data" --data-root "$T/images" \
  --data-root "$T/generic" --web "$SRC/web" --models "$SRC/models" >"$T/server.log" 2>&1 &
SRV_PID=$!
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ]; do
  [ -s "$T/port" ] && break
  kill -0 "$SRV_PID" 2>/dev/null || { tail -20 "$T/server.log"; SRV_PID=""; fail "the server did not start"; }
  sleep 0.05
done
[ -s "$T/port" ] || fail "the server did not write its port"
BASE="http://127.0.0.1:$(cat "$T/port")"

OUT="$BUILD/ui-screenshots"
rm -rf "$OUT"
node "$SRC/tests/ui/ui.test.mjs" --base "$BASE" --images "$T/images" --shapes "$T/generic/shapes" --boxes "$T/generic/boxes" \
  --out "$OUT" \
  --chromium "$CHROMIUM"
rc=$?
if [ $rc -ne 0 ]; then
  echo "--- server log (last 40 lines)"
  tail -40 "$T/server.log"
fi
exit $rc
