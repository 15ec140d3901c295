#!/bin/bash
# Benchmark (not a test): memest vs. onnx.load, wall time and peak RSS, on
#   - full-weight and graph-only ONNX files: resnet18 and vgg16 (opset 17,
#     eval) and the 16 models of the extended zoo (tests/zoo/models.py);
#   - a 2.7 GB model whose weights are external data (tests/gen_synthetic.py
#     --data: a real, sparse .data file that onnx.load reads whole);
#   - the synthetic 10^3..10^6-node graphs (tests/bench/scale.sh).
#
# Usage: tests/bench/bench.sh [--no-memest]
#   MEMEST  memest binary             (default build/memest)
#   DIR     full-weight models folder (default ${TMPDIR:-/tmp}/memest-bench-models; made with
#           export_zoo.py / export_zoo2.py --full-weights when missing:
#           about 3 GB, never committed)
#   RUNS    runs per measurement      (default 5; the median is printed)
#   PYTHON  interpreter with onnx     (default /usr/bin/python3)
# --no-memest measures only the Python half; --no-scale skips scale.sh.
#
# Wall time is taken around each run with date +%s%N (ms resolution); peak RSS
# is /usr/bin/time's %M. The onnx.load column includes interpreter start-up
# and `import onnx` (the baseline row shows those alone). Graph-only files
# point to a deleted external .data file, so for them Python runs
# onnx.load(FILE, load_external_data=False).
set -euo pipefail

cd "$(dirname "$0")/../.."
MEMEST=${MEMEST:-build/memest}
DIR=${DIR:-${TMPDIR:-/tmp}/memest-bench-models}
RUNS=${RUNS:-5}
PYTHON=${PYTHON:-/usr/bin/python3}
NO_MEMEST=0
NO_SCALE=0
for a in "$@"; do
    case $a in
        --no-memest) NO_MEMEST=1 ;;
        --no-scale) NO_SCALE=1 ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

ZOO=$(ls models/onnx/zoo/*.onnx | xargs -n1 basename | sed 's/\.onnx$//')
missing=""
for m in $ZOO; do [ -s "$DIR/zoo/$m.onnx" ] || missing="$missing,$m"; done
if [ -n "$missing" ]; then
    echo "exporting full-weight zoo models into $DIR/zoo ..." >&2
    "$PYTHON" tests/zoo/export_zoo2.py --models "${missing#,}" --full-weights "$DIR/zoo" >&2
fi
BIG="$DIR/mlp_w4096_external.onnx"
[ -s "$BIG" ] || python3 tests/gen_synthetic.py 100 "$BIG" --width 4096 --data >&2

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

row() { # FILE MEMEST-ARGS PY-LOAD-ARGS: one line of the table
    local f=$1 args=$2 led=$3 size mm mr pm pr
    size=$(awk -v s="$(stat -c %s "$f")" 'BEGIN { printf "%.2f", s / 1e6 }')
    case $f in
        *_external.onnx) size="$size+$(awk -v s="$(stat -c %s "${f%.onnx}.data")" 'BEGIN { printf "%.0f", s / 1e6 }')" ;;
    esac
    if [ "$NO_MEMEST" = 0 ]; then
        # shellcheck disable=SC2086
        read -r mm mr < <(measure "$MEMEST" "$f" $args)
    else
        mm=-; mr=-
    fi
    read -r pm pr < <(measure "$PYTHON" -c "import onnx; onnx.load('$f'$led)")
    printf '%-44s %12s %10s %14s %13s %17s\n' "$f" "$size" "$mm" "$mr" "$pm" "$pr"
}

printf '%-44s %12s %10s %14s %13s %17s\n' file "size MB" "memest ms" "memest RSS MB" \
    "onnx.load ms" "onnx.load RSS MB"
for m in $MODELS; do
    row "$DIR/${m}_op17_eval.onnx" "--input 3x224x224" ""
    row "models/onnx/${m}_op17_eval.onnx" "--input 3x224x224" ", load_external_data=False"
done
for m in $ZOO; do
    row "$DIR/zoo/$m.onnx" "--batch 1" ""
    row "models/onnx/zoo/$m.onnx" "--batch 1" ", load_external_data=False"
done
row "$BIG" "--batch 1" ""
read -r bm br < <(measure "$PYTHON" -c "import onnx")
printf '%-44s %12s %10s %14s %13s %17s\n' "(baseline: python -c 'import onnx')" "-" "-" "-" "$bm" "$br"
echo "median of $RUNS runs; $(nproc) cores; $("$PYTHON" -c 'import onnx; print("onnx", onnx.__version__)')"
if [ "$NO_SCALE" = 0 ] && [ "$NO_MEMEST" = 0 ]; then
    echo
    RUNS=$RUNS MEMEST=$MEMEST PYTHON=$PYTHON tests/bench/scale.sh
fi
