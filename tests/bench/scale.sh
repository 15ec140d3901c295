#!/bin/bash
# Benchmark (not a test): memest on synthetic graphs of 10^3..10^6 nodes
# (tests/gen_synthetic.py: deep residual MLPs and transformer stacks, ONNX
# and JSON), inference and an Adam training step (CSV report, and the
# default table), beside python's onnx.load on the ONNX files. Median of
# RUNS runs; wall seconds and peak RSS from /usr/bin/time.
#   SIZES="1e3 1e4 1e5 1e6" KINDS="mlp transformer" FORMATS="onnx json" \
#   RUNS=5 MEMEST=build/memest tests/bench/scale.sh
set -eu
cd "$(dirname "$0")/../.."
MEMEST=${MEMEST:-build/memest}
SIZES=${SIZES:-"1e3 1e4 1e5 1e6"}
KINDS=${KINDS:-"mlp transformer"}
FORMATS=${FORMATS:-"onnx json"}
RUNS=${RUNS:-5}
PYTHON=${PYTHON:-/usr/bin/python3}
DIR=${DIR:-${TMPDIR:-/tmp}/memest-bench-synthetic}
[ -x "$MEMEST" ] || { echo "no $MEMEST: build first"; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }
mkdir -p "$DIR"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
measure() { # command... → "seconds kbytes" medians
    local t=() m=()
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f "%e %M" -o "$DIR/time.txt" "$@" >/dev/null 2>&1 || echo "FAILED: $*" >&2
        read -r s k < "$DIR/time.txt"
        t+=("$s"); m+=("$k")
    done
    echo "$(printf '%s\n' "${t[@]}" | median) $(printf '%s\n' "${m[@]}" | median)"
}
mb() { echo "$1/1024" | bc -l; }
printf "%-12s %-5s %8s %8s | %-22s | %-22s | %-22s | %-22s\n" kind fmt nodes "file MB" "memest infer s / MB" "train, csv s / MB" "train, table s / MB" "onnx.load s / MB"
for kind in $KINDS; do
    for fmt in $FORMATS; do
        for n in $SIZES; do
            f="$DIR/${kind}_$n.$fmt"
            [ -f "$f" ] || python3 tests/gen_synthetic.py "$n" "$f" --kind "$kind" >/dev/null
            read -r ti mi <<< "$(measure "$MEMEST" "$f" --batch 8 --format csv -o /dev/null)"
            read -r tt mt <<< "$(measure "$MEMEST" "$f" --batch 8 --train --optimizer adam --format csv -o /dev/null)"
            read -r tb mbt <<< "$(measure "$MEMEST" "$f" --batch 8 --train --optimizer adam -o /dev/null)"
            if [ "$fmt" = onnx ] && "$PYTHON" -c "import onnx" 2>/dev/null; then
                read -r to mo <<< "$(measure "$PYTHON" -c "import onnx; onnx.load('$f', load_external_data=False)")"
            else to=-; mo=0; fi
            printf "%-12s %-5s %8s %8.1f | %8s s %9.1f MB | %8s s %9.1f MB | %8s s %9.1f MB | %8s s %9.1f MB\n" "$kind" "$fmt" "$n" \
                "$(echo "$(stat -c %s "$f")/1000000" | bc -l)" "$ti" "$(mb "$mi")" "$tt" "$(mb "$mt")" "$tb" "$(mb "$mbt")" "$to" "$(mb "$mo")"
        done
    done
done
echo "median of $RUNS runs; $(nproc) cores"
