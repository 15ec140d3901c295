/* Issue 14, helper quant: the temporaries a quantized Linear's kernel makes
 * (src/memory.c quant_temp), read from the recorded timeline through the
 * public API: on CUDA no other op of a language model's forward has a
 * temporary, so the largest "temporary" point of the series is the largest
 * Linear's, computed here from each kernel's layout:
 *   fp8:      the activation [T, in] as e4m3 (1 byte) + one fp32 scale
 *   LLM.int8: A.to(fp16) [T, in] (bf16 model) + CA, CAt, col32 [T, in] int8
 *             + SCA fp32 [T] + SCAt fp32 [in] + out32 int32 [T, out]
 *             + mm_dequant's fp16 [T, out]
 *   nf4:      the dequantized [out, in] weight in bf16 when T > 1, none for
 *             one token (gemv_4bit)
 *   int4:     none (GPTQ kernels dequantize in registers)
 * usage: test_llm_quant TMPDIR */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "memest/memest.h"

static int fails;

#define D 1024
#define I 4096

static uint64_t max_temp(const char *cfg, const char *weights, int64_t seq, int64_t batch, int64_t new_tokens)
{
    MemestLoadSettings ls;
    memest_load_default_settings(&ls);
    ls.weights = weights;
    ls.seq = seq;
    ls.batch = batch;
    ls.new_tokens = new_tokens;
    char err[512];
    MemestModel *m = NULL;
    MemestAnalysis *a = NULL;
    uint64_t best = UINT64_MAX;
    if (memest_model_load(&m, cfg, &ls, err, sizeof(err)) < 0 || memest_analyze(m, NULL, &a, err, sizeof(err)) < 0) {
        printf("FAIL: %s --weights %s: %s\n", cfg, weights, err);
        fails++;
        goto out;
    }
    MemestMemorySettings ms;
    memest_memory_default_settings(&ms);
    ms.record_series = 1;
    const MemestSeriesPoint *p;
    int n = 0;
    if (memest_set_memory(a, &ms, err, sizeof(err)) < 0 || memest_memory_series(a, 0, &p, &n) < 0 || n == 0) {
        printf("FAIL: --weights %s: no series: %s\n", weights, err);
        fails++;
        goto out;
    }
    best = 0;
    for (int i = 0; i < n; i++)
        if (p[i].live[MEMEST_MEM_TEMPORARY] > best) best = p[i].live[MEMEST_MEM_TEMPORARY];
out:
    memest_analysis_free(&a);
    memest_model_free(&m);
    return best;
}

static void expect(const char *what, uint64_t got, uint64_t want)
{
    if (got != want) {
        printf("FAIL: %s: largest temporary %llu, want %llu\n", what, (unsigned long long)got, (unsigned long long)want);
        fails++;
    }
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static uint64_t int8_temp(uint64_t T, uint64_t out, uint64_t in)
{
    return 2 * T * in + 3 * T * in + 4 * T + 4 * in + 4 * T * out + 2 * T * out;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    char cfg[1024];
    snprintf(cfg, sizeof(cfg), "%s/quant_mlp.config.json", argv[1]);
    FILE *f = fopen(cfg, "w");
    if (!f) return 2;
    fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": %d, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 8, \"num_key_value_heads\": 8, \"intermediate_size\": %d, "
               "\"torch_dtype\": \"bfloat16\"}\n", D, I);
    fclose(f);
    const uint64_t T = 16;
    /* q/k/v/o [D, D], gate/up [I, D], down [D, I]; the head stays bf16 */
    expect("fp8 prefill", max_temp(cfg, "fp8", (int64_t)T, 1, 0), T * I + 4);
    expect("int8 prefill", max_temp(cfg, "int8", (int64_t)T, 1, 0),
           max3(int8_temp(T, D, D), int8_temp(T, I, D), int8_temp(T, D, I)));
    expect("nf4 prefill", max_temp(cfg, "nf4", (int64_t)T, 1, 0), (uint64_t)I * D * 2);
    expect("nf4 decode, batch 1", max_temp(cfg, "nf4", (int64_t)T, 1, 4), 0);
    expect("nf4 decode, batch 3", max_temp(cfg, "nf4", (int64_t)T, 3, 4), (uint64_t)I * D * 2);
    expect("int8 decode, batch 3", max_temp(cfg, "int8", (int64_t)T, 3, 4),
           max3(int8_temp(3, D, D), int8_temp(3, I, D), int8_temp(3, D, I)));
    expect("int4 prefill", max_temp(cfg, "int4", (int64_t)T, 1, 0), 0);
    expect("bf16 prefill", max_temp(cfg, "bf16", (int64_t)T, 1, 0), 0);
    if (!fails) printf("ok\n");
    return fails ? 1 : 0;
}
