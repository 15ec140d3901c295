/* Every allocation may fail: with an allocator that refuses the n-th request,
 * for n = 0, 1, 2, ... until the whole pipeline succeeds, loading,
 * analysis, the memory timeline and the reports must return an error, never
 * crash or leak (the sanitizer build checks the leaks). */
#include <stdio.h>
#include <stdlib.h>

#include "memest/memest.h"

static long budget; /* allocations left before the next one fails */

static void *fail_malloc(void *o, size_t n) { (void)o; return budget-- > 0 ? malloc(n) : NULL; }
static void *fail_realloc(void *o, void *p, size_t n) { (void)o; return budget-- > 0 ? realloc(p, n) : NULL; }
static void fail_free(void *o, void *p) { (void)o; free(p); }

static char last_err[512];

static int run(const char *path, const char *input)
{
    const char *inputs[1] = { input };
    MemestLoadSettings ls = { .inputs = inputs, .n_inputs = input ? 1 : 0, .batch = 2 };
    char err[512] = "";
    MemestModel *m = NULL;
    MemestAnalysis *a = NULL;
    int rc = memest_model_load(&m, path, &ls, err, sizeof(err));
    if (rc == 0) {
        MemestAnalyzeSettings as = { 0 };
        rc = memest_analyze(m, &as, &a, err, sizeof(err));
    }
    if (rc == 0) {
        MemestMemorySettings ms = { .mode = MEMEST_RUN_TRAIN, .optimizer = MEMEST_OPT_ADAM, .record_series = 1, .checkpoint = 2 };
        rc = memest_set_memory(a, &ms, err, sizeof(err));
    }
    if (rc == 0) {
        FILE *null = fopen("/dev/null", "w");
        rc = memest_report(a, MEMEST_FORMAT_JSON, null);
        if (rc == 0) rc = memest_plot_svg(a, null, 0, NULL);
        fclose(null);
    }
    if (rc == 0) {
        /* re-bound to batch 3 and reported into a buffer */
        rc = memest_model_set_batch(m, 3, err, sizeof(err));
        memest_analysis_free(&a);
        if (rc == 0) {
            MemestAnalyzeSettings as = { 0 };
            rc = memest_analyze(m, &as, &a, err, sizeof(err));
        }
        char *text = NULL;
        if (rc == 0) rc = memest_report_string(a, MEMEST_FORMAT_TABLE, &text, NULL);
        memest_free(text);
    }
    memest_analysis_free(&a);
    memest_model_free(&m);
    snprintf(last_err, sizeof(last_err), "%s", err);
    return rc;
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : ".";
    static const struct { const char *file, *input; } models[] = {
        { "models/seed_sequential.json", NULL },
        { "models/onnx/squeezenet1_0_op17_train.onnx", "3x224x224" },
    };
    MemestAllocator a = { NULL, fail_malloc, fail_realloc, fail_free };
    int fails = 0;
    for (size_t k = 0; k < sizeof(models) / sizeof(models[0]); k++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", root, models[k].file);
        long n;
        memest_set_allocator(&a);
        for (n = 0; n < 200000; n++) {
            budget = n;
            int rc = run(path, models[k].input);
            if (rc == 0) break;
            if (rc != MEMEST_ERR_NOMEM) {
                printf("FAIL %s: allocation %ld failing gave error %d, not out of memory: %s\n", models[k].file, n, rc, last_err);
                fails++;
                break;
            }
        }
        memest_set_allocator(NULL);
        printf("%s: every one of the first %ld allocations failed in turn, then it ran\n", models[k].file, n);
        if (n == 200000) fails++;
    }
    return fails != 0;
}
