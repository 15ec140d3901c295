#!/bin/bash
# Benchmark (not a test): memest vs. onnx.load on full-weight and graph-only
# ONNX files of resnet18 and vgg16 (opset 17, eval).
#
# Usage: tests/bench/bench.sh [--no-memest]
#   MEMEST  memest binary             (default build/memest)
#   DIR     full-weight models folder (default build/bench-models; made with
#           /usr/bin/python3 tests/zoo/export_zoo.py --full-weights DIR when
#           missing: ~46 MB + ~550 MB, never committed)
#   RUNS    runs per measurement      (default 5; the median is printed)
#   PYTHON  interpreter with onnx     (default /usr/bin/python3)
# --no-memest measures only the Python half.
#
# Wall time is taken around each run with date +%s%N (ms resolution); peak RSS
# is /usr/bin/time's %M. The onnx.load column includes interpreter start-up
# and `import onnx` (the baseline row shows those alone). Graph-only files
# point to a deleted external .data file, so for them Python runs
# onnx.load(FILE, load_external_data=False).
set -euo pipefail

cd "$(dirname "$0")/../.."
MEMEST=${MEMEST:-build/memest}
DIR=${DIR:-build/bench-models}
RUNS=${RUNS:-5}
PYTHON=${PYTHON:-/usr/bin/python3}
NO_MEMEST=0
for a in "$@"; do
    case $a in
        --no-memest) NO_MEMEST=1 ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench.sh: unknown argument $a" >&2; exit 2 ;;
    esac
done

if [ ! -x /usr/bin/time ]; then
    echo "bench.sh: /usr/bin/time is missing; install it: apt-get install time" >&2
    exit 1
fi
if [ "$NO_MEMEST" = 0 ] && [ ! -x "$MEMEST" ]; then
    echo "bench.sh: $MEMEST not found or not executable; build memest first" \
         "(or set MEMEST=path, or pass --no-memest for the Python half only)" >&2
    exit 1
fi

MODELS="resnet18 vgg16"
need_export=0
for m in $MODELS; do
    [ -s "$DIR/${m}_op17_eval.onnx" ] || need_export=1
    if [ ! -s "models/onnx/${m}_op17_eval.onnx" ]; then
        echo "bench.sh: models/onnx/${m}_op17_eval.onnx missing;" \
             "run /usr/bin/python3 tests/zoo/export_zoo.py first" >&2
        exit 1
    fi
done
if [ "$need_export" = 1 ]; then
    mkdir -p "$DIR"
    tmp=$(mktemp -d "$DIR/.export.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    echo "exporting full-weight models into $DIR ..." >&2
    "$PYTHON" tests/zoo/export_zoo.py --full-weights "$tmp" >&2
    for m in $MODELS; do mv -f "$tmp/${m}_op17_eval.onnx" "$DIR/"; done
fi

# measure CMD...: prints "median_ms median_rss_mb" over $RUNS runs, or "FAIL"
measure() {
    local i t0 t1 tf ms=() kb=()
    tf=$(mktemp)
    for ((i = 0; i < RUNS; i++)); do
        t0=$(date +%s%N)
        if ! /usr/bin/time -f "%M" -o "$tf" "$@" > /dev/null 2> "$tf.err"; then
            echo "bench.sh: failed: $* ($(tail -1 "$tf.err"))" >&2
            rm -f "$tf" "$tf.err"
            echo "FAIL FAIL"
            return
        fi
        t1=$(date +%s%N)
        ms+=("$(( (t1 - t0) / 1000000 ))")
        kb+=("$(tail -1 "$tf")")
    done
    rm -f "$tf" "$tf.err"
    local mid=$(( RUNS / 2 ))
    local mms mkb
    mms=$(printf '%s\n' "${ms[@]}" | sort -n | sed -n "$((mid + 1))p")
    mkb=$(printf '%s\n' "${kb[@]}" | sort -n | sed -n "$((mid + 1))p")
    echo "$mms $(awk -v k="$mkb" 'BEGIN { printf "%.1f", k / 1024 }')"
}

printf '%-44s %9s %10s %14s %13s %17s\n' file "size MB" "memest ms" "memest RSS MB" \
    "onnx.load ms" "onnx.load RSS MB"
for m in $MODELS; do
    for f in "$DIR/${m}_op17_eval.onnx" "models/onnx/${m}_op17_eval.onnx"; do
        size=$(awk -v s="$(stat -c %s "$f")" 'BEGIN { printf "%.2f", s / 1e6 }')
        case $f in
            models/onnx/*) led=", load_external_data=False" ;;
            *) led="" ;;
        esac
        if [ "$NO_MEMEST" = 0 ]; then
            read -r mm mr < <(measure "$MEMEST" "$f" --input 3x224x224)
        else
            mm=-; mr=-
        fi
        read -r pm pr < <(measure "$PYTHON" -c "import onnx; onnx.load('$f'$led)")
        printf '%-44s %9s %10s %14s %13s %17s\n' "$f" "$size" "$mm" "$mr" "$pm" "$pr"
    done
done
read -r bm br < <(measure "$PYTHON" -c "import onnx")
printf '%-44s %9s %10s %14s %13s %17s\n' "(baseline: python -c 'import onnx')" "-" "-" "-" "$bm" "$br"
echo "median of $RUNS runs; $(nproc) cores; $("$PYTHON" -c 'import onnx; print("onnx", onnx.__version__)')"
