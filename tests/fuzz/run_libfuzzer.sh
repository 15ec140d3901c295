#!/bin/bash
# Builds the fuzz targets with clang's libFuzzer + ASan + UBSan and runs one:
#   tests/fuzz/run_libfuzzer.sh onnx|json|safetensors|gguf|config SECONDS
# (safetensors, gguf and config: tests/fuzz/fuzz_headers.c, the language-model readers)
# New corpus entries go to build-fuzz/corpus-FMT; crashes to build-fuzz/crash-*.
# Needs clang and libclang-rt (apt-get install clang libclang-rt-14-dev).
set -eu
cd "$(dirname "$0")/../.."
fmt=${1:-onnx}
secs=${2:-60}
out=build-fuzz
mkdir -p "$out/corpus-$fmt"
[ -f build/onnx.pb-c.c ] && [ -f build/include/memest/version.h ] || { meson setup build >/dev/null; ninja -C build >/dev/null; }
case $fmt in
json) define=-DFUZZ_JSON target=tests/fuzz/fuzz_load.c ;;
safetensors) define= target=tests/fuzz/fuzz_headers.c ;;
gguf) define=-DFUZZ_GGUF target=tests/fuzz/fuzz_headers.c ;;
config) define=-DFUZZ_LLM_CONFIG target=tests/fuzz/fuzz_headers.c ;;
*) define=-DFUZZ_ONNX target=tests/fuzz/fuzz_load.c ;;
esac
clang -g -O1 -std=c11 -D_GNU_SOURCE -DFUZZ_LIBFUZZER $define -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Iinclude -Ibuild/include -Isrc -Ibuild $(pkg-config --cflags libcjson libprotobuf-c) \
    $target src/*.c src/canon/*.c src/load/*.c src/ops/*.c src/report/*.c build/onnx.pb-c.c \
    $(pkg-config --libs libcjson libprotobuf-c) -lm -pthread -o "$out/fuzz_$fmt"
case $fmt in
json) dict=-dict=tests/fuzz/dict.json ;;
safetensors) dict=-dict=tests/fuzz/dict_safetensors.txt ;;
*) dict= ;;
esac
exec "$out/fuzz_$fmt" $dict -max_total_time="$secs" -artifact_prefix="$out/" -print_final_stats=1 \
    "$out/corpus-$fmt" "tests/fuzz/corpus/$fmt"
