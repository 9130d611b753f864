#!/usr/bin/env bash
# kernel_regs.sh LOG...: checks that every kernel launched with more than 256 threads
# per block fits in one multiprocessor's registers, from ptxas's own counts.
#
# LOG is the output of a build with -Xptxas -v (the CMake build adds it to the CUDA
# flags), where ptxas prints for each kernel and architecture
#   ptxas info    : Compiling entry function '_Z14k_xent_forwardiiiPKfS0_iiPfS1_' for 'sm_90'
#   ptxas info    : Used 30 registers, used 1 barriers, 256 bytes smem
# The block sizes come from the launches in kernels/*.cu (CDIGITS_KERNELS_DIR to look
# elsewhere): `k_name<<<grid, THREADS, ...>>>` with THREADS a literal or a #define of
# those files (CDK_THREADS, CDK_REDUCE_THREADS). Only compiled files have lines in a
# log, and `make -j` may interleave two compiles' lines: take the log of a clean build
# with make's --output-sync (Ninja keeps each command's output whole).
#
# A block needs its threads' registers at once: 65536 per multiprocessor on every GPU
# from sm_50 to sm_90, allocated per warp in units of 256 (a thread's count rounded up
# to a multiple of 8). A kernel past that compiles and then fails every launch with
# "too many resources requested for launch"; __launch_bounds__ of its block size makes
# ptxas stay within it.
#
# Prints kernel | registers | threads | ok for the kernels launched with more than 256
# threads. Exit 0 when they all fit; 1 when one does not or has no count in the logs
# (naming it, its registers and its block size); 2 on a usage error.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kdir=${CDIGITS_KERNELS_DIR:-$here/../../kernels}
limit=65536
big=256

if (($# == 0)); then
    echo "usage: $0 LOG...  (the output of a CUDA build with -Xptxas -v)" >&2
    exit 2
fi
for log in "$@"; do
    if [[ ! -r $log ]]; then
        echo "kernel_regs: cannot read $log" >&2
        exit 2
    fi
done
shopt -s nullglob
sources=("$kdir"/*.cuh "$kdir"/*.h "$kdir"/*.cu)
if ! compgen -G "$kdir/*.cu" >/dev/null; then
    echo "kernel_regs: no kernels/*.cu under $kdir; set CDIGITS_KERNELS_DIR" >&2
    exit 2
fi
if ! grep -qh "Compiling entry function" "$@"; then
    echo "kernel_regs: no ptxas -v output in $*: build the kernels with -Xptxas -v" \
        "(the CMake build does; a clean build compiles every kernel)" >&2
    exit 2
fi

# "name threads file" per launch: the block size resolved through the #defines of the
# kernel sources (and the headers beside them); a size that is neither is "?"
launches=$(awk '
    FNR == 1 { file = FILENAME; sub(".*/", "", file); order[++nfiles] = file }
    /^[ \t]*#define[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]+[0-9]+[ \t]*(\/\*.*)?$/ { def[$2] = $3 }
    { text[file] = text[file] " " $0 } # a launch may span lines
    END {
        for (f = 1; f <= nfiles; f++) {
            file = order[f]
            line = text[file]
            while (match(line, /[A-Za-z_][A-Za-z0-9_]*(<[^<>]*>)?[ \t]*<<<[^,]*,[ \t]*[^,>]+/)) {
                m = substr(line, RSTART, RLENGTH)
                line = substr(line, RSTART + RLENGTH)
                name = m; sub(/(<[^<>]*>)?[ \t]*<<<.*/, "", name)
                t = m; sub(/.*<<<[^,]*,[ \t]*/, "", t); gsub(/[ \t]/, "", t)
                if (t !~ /^[0-9]+$/) t = (t in def) ? def[t] : "?"
                print name, t, file
            }
        }
    }' "${sources[@]}")

# "name arch registers" per ptxas entry, the name taken from its mangled form
counts=$(awk '
    /Compiling entry function/ {
        m = $0; sub(/.*Compiling entry function .?/, "", m); sub(/. for .*/, "", m)
        arch = $0; sub(/.* for .?/, "", arch); sub(/.$/, "", arch)
        name = m
        if (match(m, /^_Z[0-9]+/)) {
            len = substr(m, 3, RLENGTH - 2) + 0
            name = substr(m, RLENGTH + 1, len)
        }
        next
    }
    /Used [0-9]+ registers/ && name != "" {
        r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r)
        print name, arch, r
        name = ""
    }' "$@")

status=0
rows=()
problems=()
checked=0
while read -r name threads file; do
    [[ -z $name ]] && continue
    if [[ $threads == "?" ]]; then
        echo "kernel_regs: $name in kernels/$file: block size is not a literal or #define;" \
            "not checked" >&2
        continue
    fi
    ((threads > big)) || continue
    checked=$((checked + 1))
    found=0
    while read -r cname arch regs; do
        [[ $cname == "$name" ]] || continue
        found=1
        warps=$(((threads + 31) / 32))
        need=$((warps * 32 * ((regs + 7) / 8 * 8)))
        if ((need > limit)); then
            rows+=("$name ($arch)|$regs|$threads|FAIL")
            problems+=("$name ($arch, kernels/$file): $regs registers x $threads threads needs $need of $limit registers per block; give it __launch_bounds__($threads) or launch fewer threads")
            status=1
        else
            rows+=("$name ($arch)|$regs|$threads|ok")
        fi
    done <<<"$counts"
    if ((!found)); then
        rows+=("$name|?|$threads|FAIL")
        problems+=("$name (kernels/$file, $threads threads): no ptxas register count in the logs; rebuild kernels/$file with -Xptxas -v")
        status=1
    fi
done < <(sort -u <<<"$launches")

printf '%-40s | %9s | %7s | %s\n' kernel registers threads ok
printf '%s\n' "-----------------------------------------+-----------+---------+-----"
for r in ${rows[@]+"${rows[@]}"}; do
    IFS='|' read -r k g t o <<<"$r"
    printf '%-40s | %9s | %7s | %s\n' "$k" "$g" "$t" "$o"
done
if ((checked == 0)); then
    echo "kernel_regs: no kernel in $kdir is launched with more than $big threads"
fi
for p in ${problems[@]+"${problems[@]}"}; do
    echo "FAIL $p"
done
((status == 0)) && echo "kernel_regs: every kernel launched with more than $big threads fits"
exit $status
