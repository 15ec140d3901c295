/* Fuzz target for the language-model readers (src/load/safetensors.c;
 * gguf.c with FUZZ_GGUF; llm_read.c's config.json with FUZZ_LLM_CONFIG): bytes as a safetensors
 * file of exactly that size, header checks, quantization recognition and
 * totals. Built by tests/fuzz/run_libfuzzer.sh safetensors|gguf|config under
 * libFuzzer, else with the replay driver of fuzz_load.c's kind below
 * (meson test replays the corpus). Bad input must end in an error code. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load/llm.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    MeLlmConfig c;
    memset(&c, 0, sizeof(c));
    MeDiag d = { 0 };
#ifdef FUZZ_LLM_CONFIG
    /* me_llm_read takes a path: the bytes go to a private temp file */
    char path[] = "/tmp/fuzz-config-XXXXXX.json";
    int fd = mkstemps(path, 5);
    if (fd < 0) return 0;
    if (write(fd, data, size) == (ssize_t)size && me_llm_read(path, &c, &d) == 0) {
        uint64_t p, b;
        me_llm_params(&c, &p, &b, &d);
    }
    close(fd);
    unlink(path);
    me_llm_config_free(&c);
#elif defined(FUZZ_GGUF)
    snprintf(c.path, sizeof(c.path), "fuzz.gguf");
    if (me_gguf_parse(&c, c.path, data, size, &d) == 0) {
        uint64_t p, b;
        me_llm_tensor_totals(&c, &p, &b);
        if (b > size) abort(); /* every tensor lies inside the file */
    }
    me_llm_tensors_free(&c);
#else
    snprintf(c.path, sizeof(c.path), "fuzz.safetensors");
    if (me_safetensors_parse(&c, c.path, data, size, size, &d) == 0 && me_llm_classify_tensors(&c, &d) == 0) {
        uint64_t p, b;
        me_llm_tensor_totals(&c, &p, &b);
        /* stored bytes are the header's, whatever the quantization says */
        uint64_t sum = 0;
        for (int i = 0; i < c.n_tensors; i++) sum += c.tensors[i].bytes;
        if (b != sum || b > size) abort();
    }
    me_llm_tensors_free(&c);
#endif
    return 0;
}

#ifndef FUZZ_LIBFUZZER
#include "replay.h"
#endif
