/* Fuzz target: load → shape inference → cost → memory timeline → report,
 * for ONNX (FUZZ_ONNX) or JSON (FUZZ_JSON) bytes. Built as a libFuzzer
 * target with clang -fsanitize=fuzzer (-Dfuzzing_engine=libfuzzer), else
 * with the replay driver below, which runs files and folders given on the
 * command line (the corpus, in meson test). Bad input must end in an error
 * code, never a crash: the sanitizer build turns any slip into a failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memest/memest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
#ifdef FUZZ_JSON
    const char *name = "fuzz.json"; /* the name picks the JSON loader */
#else
    const char *name = "fuzz.onnx";
#endif
    static const char *const inputs[] = { "3x32x32" };
    MemestLoadSettings ls;
    memest_load_default_settings(&ls);
    ls.inputs = inputs;
    ls.n_inputs = 0;
    ls.batch = 2;
    char err[1024];
    MemestModel *m = NULL;
    MemestAnalysis *a = NULL;
    if (memest_model_load_memory(&m, data, size, name, &ls, err, sizeof(err)) == 0) {
        MemestAnalyzeSettings as;
        memest_analyze_default_settings(&as);
        if (memest_analyze(m, &as, &a, err, sizeof(err)) == 0) {
            MemestMemorySettings ms;
            memest_memory_default_settings(&ms);
            ms.mode = MEMEST_RUN_TRAIN;
            ms.optimizer = MEMEST_OPT_ADAM;
            ms.record_series = 1;
            memest_set_memory(a, &ms, err, sizeof(err));
            char *text = NULL;
            for (int f = MEMEST_FORMAT_TABLE; f <= MEMEST_FORMAT_JSON; f++) {
                memest_report_string(a, (MemestFormat)f, &text, NULL);
                memest_free(text);
                text = NULL;
            }
            memest_plot_svg_string(a, &text, NULL, 0, NULL);
            memest_free(text);
            memest_analysis_free(&a);
            /* the same graph re-bound to another batch */
            if (memest_model_set_batch(m, 5, err, sizeof(err)) == 0) {
                as.convention = MEMEST_CONVENTION_TORCHSTAT;
                memest_analyze(m, &as, &a, err, sizeof(err));
            }
        }
    }
    memest_analysis_free(&a);
    memest_model_free(&m);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
static int run_file(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    struct stat st;
    /* sized to the file: meson's MALLOC_PERTURB_ writes every byte of a buffer */
    size_t cap = fstat(fileno(f), &st) == 0 && st.st_size < (64 << 20) ? (size_t)st.st_size + 1 : 64 << 20;
    uint8_t *buf = malloc(cap);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    if (!buf) return -1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: not found\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            files += run_file(argv[i]) == 0;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", argv[i], e->d_name);
            files += run_file(p) == 0;
        }
        if (d) closedir(d);
    }
    printf("replayed %d input(s)\n", files);
    return files ? 0 : 1;
}
#endif
