#!/usr/bin/env bash
# Bit-identity of two builds' outputs, at every ISA level this CPU runs and
# both precisions: the check a refactor of the kernels or the forward must
# pass (docs/testing.md). Not a ctest test: it needs a second build (of the
# commit before the change).
#
#   scripts/compare_builds.sh OLD_BUILD NEW_BUILD [FIXTURE_DIR]
#   PRECISIONS=fp32 scripts/compare_builds.sh ...   (one precision only: a
#       change that alters fast on purpose must still leave fp32 as it was)
#
# Runs, with each build: `hamer regress` on float and uint8 crops of the
# shared photos (models: the depth-2 and the full-size fixtures; the
# full-size model only at the widest level: the scalar code takes minutes
# a crop), `hamer detect` on the shared photos, and `hamer run` on one;
# then compares every output byte for byte (regress's .npz arrays; the
# JSONs without their timings). Exit 1 on the first difference.
set -euo pipefail
old=$1 new=$2
fx=${3:-${HAMER_FIXTURE_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build-fixtures}}
imgs=${HAMER_SHARED_IMAGES:-$(cd "$(dirname "$0")/../.." && pwd)/shared/images}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HAMER_NO_CACHE=1

isas=(scalar)
"$new/hamer" --version >"$tmp/v" 2>&1 || true
flags=$(grep -o 'cpu: .*' "$tmp/v" || true)
case "$flags" in *avx2*) isas+=(avx2) ;; esac
case "$flags" in *avx512*) isas+=(avx512) ;; esac
case "$flags" in *" amx"*) isas+=(amx) ;; esac
case "$flags" in *neon*) isas+=(neon) ;; esac
widest=${isas[-1]}
echo "levels: ${isas[*]}"

"$new/hamer" crop --image "$imgs/hamer_example_1.jpg" --box 600,490,780,870:left --box 800,300,1000,600 \
    --output "$tmp/crops_f32.npy" >/dev/null
"$new/hamer" crop --image "$imgs/hamer_example_5.jpg" --box 100,100,400,500 --box 300,200,600,600:left --u8 \
    --output "$tmp/crops_u8.npy" >/dev/null

same() { # what a b
    if ! cmp -s "$2" "$3"; then
        echo "DIFFER: $1"
        exit 1
    fi
    echo "same: $1"
}
# the documents without their timings (a "timings_ms" object, *_ms and *_s numbers)
strip_times() {
    python3 -c '
import json, sys
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k != "timings_ms" and not k.endswith(("_ms", "_s"))}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o
print(json.dumps(strip(json.load(open(sys.argv[1]))), sort_keys=True))' "$1"
}

for isa in "${isas[@]}"; do
    for prec in ${PRECISIONS:-fp32 fast}; do
        models=(d2h2)
        [ "$isa" = "$widest" ] && models+=(full)
        for m in "${models[@]}"; do
            for c in f32 u8; do
                for b in old new; do
                    dir=${!b}
                    rm -f "$tmp/$b.npz"
                    HAMER_ISA=$isa "$dir/hamer" regress --model "$fx/$m.ckpt" --input "$tmp/crops_$c.npy" \
                        --precision "$prec" --threads 2 --output "$tmp/$b.npz" 2>"$tmp/$b.err" || true
                done
                if ! [ -s "$tmp/new.npz" ]; then
                    # a precision this level cannot run: both builds must refuse it alike
                    same "regress $m $c $prec $isa (refused: $(head -c 80 "$tmp/new.err"))" "$tmp/old.err" "$tmp/new.err"
                    continue
                fi
                same "regress $m $c $prec $isa" "$tmp/old.npz" "$tmp/new.npz"
            done
        done
    done
    for p in hamer_example_1 hamer_example_5 wilor_typing; do
        for b in old new; do
            dir=${!b}
            HAMER_ISA=$isa "$dir/hamer" detect --image "$imgs/$p.jpg" --threads 2 --output "$tmp/$b.json" >/dev/null 2>&1
            strip_times "$tmp/$b.json" >"$tmp/$b.s"
        done
        same "detect $p $isa" "$tmp/old.s" "$tmp/new.s"
    done
    for b in old new; do
        dir=${!b}
        HAMER_ISA=$isa "$dir/hamer" run --model "$fx/d2h2.ckpt" --image "$imgs/hamer_example_1.jpg" --threads 2 \
            --output "$tmp/$b.json" >/dev/null 2>&1
        strip_times "$tmp/$b.json" >"$tmp/$b.s"
    done
    same "run d2h2 hamer_example_1 $isa" "$tmp/old.s" "$tmp/new.s"
done
echo "all outputs bit-identical"
