#!/usr/bin/env bash
# The module map of docs/architecture.md, checked on every #include in src/: each
# public header belongs to one module, and a module may include only its own headers
# and those of the modules its row allows. An include that runs back up (the store into
# the scheduler, the engine into a backend's own header, common into the dataset code)
# fails here by name, before it becomes a link error or a habit.
set -uo pipefail
src="${CDIGITS_SOURCE_DIR:?}"
pass=0 fail=0

# header (include/cdigits/) -> the module that owns it
declare -A owner=(
  [util.h]=common [log.h]=common [jsonl.h]=common [events.h]=common [err.h]=common
  [jobdir.h]=common [base64.h]=common [list_line.h]=common [group.h]=common
  [image_kind.h]=common [spawn.h]=common
  [mpi_group.h]=mpi
  [lr_policy.h]=core [train_keys.h]=core [augment.h]=core
  [dataset.h]=dataset [image.h]=dataset
  [backend.h]=backend_iface [cuda_check.h]=backend
  [net.h]=engine [prototxt.h]=engine [train.h]=engine [infer.h]=engine [loader.h]=engine [caffemodel.h]=engine [onnx_import.h]=engine [onnx_export.h]=engine
  [backend_select.h]=engine [detect.h]=engine
  [store.h]=store
  [sched.h]=scheduler [model_server.h]=scheduler
  [server.h]=server [server_hw.h]=server
)
# module (src/ folder) -> the modules it may include besides itself; backend_iface is
# the interface every backend implements and the engine calls through
declare -A allowed=(
  [common]=""
  [core]="common"
  [dataset]="common"
  [backend]="backend_iface core common"
  [engine]="backend_iface dataset core common"
  [mpi]="common"
  [cli]="engine mpi backend_iface dataset core common"
  [store]="common"
  [scheduler]="store common"
  [server]="scheduler store dataset core common"
)

# every public header has an owner (a new header must be placed on the map)
for h in "$src"/include/cdigits/*.h; do
  name=$(basename "$h")
  if [ -n "${owner[$name]:-}" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: include/cdigits/$name is on no module's row: add it to this map and docs/architecture.md"
  fi
done

for dir in "$src"/src/*/; do
  mod=$(basename "$dir")
  if [ -z "${allowed[$mod]+set}" ]; then
    fail=$((fail + 1)); echo "FAIL: src/$mod is not on the module map: add its row here and in docs/architecture.md"
    continue
  fi
  while IFS=: read -r file line inc; do
    h=${inc#*\"cdigits/}; h=${h%%\"*}
    m=${owner[$h]:-}
    [ -z "$m" ] && continue # reported above
    if [ "$m" = "$mod" ] || [[ " ${allowed[$mod]} " == *" $m "* ]]; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
      echo "FAIL: ${file#"$src"/}:$line includes cdigits/$h ($m), which $mod may not use (allowed: ${allowed[$mod]:-none})"
    fi
  done < <(grep -rnoE '#include "cdigits/[a-z_]+\.h"' "$dir" --include='*.c' --include='*.h' --include='*.cu')
  # a module's private headers stay inside it
  while IFS=: read -r file line inc; do
    fail=$((fail + 1))
    echo "FAIL: ${file#"$src"/}:$line reaches into another module's folder ($inc)"
  done < <(grep -rnoE '#include "\.\./[^"]+"' "$dir" --include='*.c' --include='*.h')
done

echo "layering: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
