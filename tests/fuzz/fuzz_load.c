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
#include "replay.h"
#endif
