#!/bin/bash
# Writes memest's table and JSON report for every model in models/ in every
# mode into a folder, one file per (model, mode, format), so that a refactor
# can be checked to change no figure: run it before and after, then
# `diff -r BEFORE AFTER`. A regression check of memest against itself, not
# truth. Usage: tests/bench/outputs.sh OUTDIR [MEMEST]
set -u
cd "$(dirname "$0")/../.."
out=${1:?usage: outputs.sh OUTDIR [MEMEST]}
memest=${2:-build/memest}
mkdir -p "$out"

# input specs of the zoo models, from their truth files
spec() {
    local name=$1 f=golden/truth/zoo/$1.json
    case $2 in *.json) return;; esac
    [ -f "$f" ] || f=golden/truth/memory/$name.json
    [ -f "$f" ] || { echo "--input 3x224x224"; return; }
    python3 - "$f" <<'EOF'
import json, sys
for i in json.load(open(sys.argv[1])).get("inputs", []):
    print("--input %s=%s:%s" % (i["name"], "x".join(map(str, i["shape"])), i.get("dtype", "float32")), end=" ")
EOF
}

modes=(
    "infer|"
    "infer_cpu|--runtime cpu"
    "grad|--grad"
    "grad_b8_cpu|--grad --batch 8 --runtime cpu"
    "sgd|--train --optimizer sgd"
    "momentum_cpu|--train --optimizer momentum --runtime cpu"
    "adam_b8|--train --optimizer adam --batch 8"
    "adamw_bf16|--train --optimizer adamw --amp bf16"
    "adam_fp16_cpu|--train --optimizer adam --amp fp16 --runtime cpu"
    "adagrad_half|--train --optimizer adagrad --dtype fp16"
    "rmsprop_ckpt|--train --optimizer rmsprop --checkpoint sqrt --input-grad"
    "none_ckpt4|--train --optimizer none --checkpoint 4"
    "zero3|--train --optimizer adam --gpus 8 --shard zero3"
    "zero1_gpu|--train --optimizer sgd --gpus 4 --shard zero1 --gpu a100-80gb"
    "maxbatch|--train --optimizer adam --gpu rtx3090 --max-batch"
    "torchstat|--convention torchstat"
    "fvcore|--convention fvcore --grad"
    "ptflops|--convention ptflops"
    "thop|--convention thop"
    "deepspeed|--convention deepspeed --gpu h100"
)

n=0
for f in models/*.json models/onnx/*.onnx models/onnx/zoo/*.onnx; do
    name=$(basename "$f"); name=${name%.*}
    [ "$f" != "${f#models/onnx/zoo/}" ] && name=zoo_$name
    s=$(spec "$(basename "${f%.*}")" "$f")
    for m in "${modes[@]}"; do
        tag=${m%%|*}; opts=${m#*|}
        for fmt in table json; do
            # shellcheck disable=SC2086
            "$memest" "$f" $s $opts --format $fmt >"$out/$name.$tag.$fmt" 2>"$out/$name.$tag.$fmt.err"
            echo "exit $?" >>"$out/$name.$tag.$fmt.err"
            n=$((n + 1))
        done
    done
done
echo "$n reports in $out"
