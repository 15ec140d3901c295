/* A program that sees memest only through its public header, as a binding
 * would: loads resnet18 from a buffer (freed at once: the library keeps no
 * pointer into it), analyzes it at batch 1 and batch 4 without reloading,
 * renders the JSON report into a buffer and through a write callback, and
 * checks the figures a re-binding must change and those it must not.
 * Usage: test_public_api SOURCE_ROOT. Also run under valgrind (meson). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memest/memest.h>

#include "../check.h"

static int count_bytes(void *opaque, const char *data, size_t len)
{
    (void)data;
    *(size_t *)opaque += len;
    return 0;
}

static int refuse(void *opaque, const char *data, size_t len)
{
    (void)opaque;
    (void)data;
    (void)len;
    return -1;
}

/* A model read into a buffer of our own, loaded from it, the buffer freed;
 * n_inputs 1: input is its spec, else none. */
static MemestModel *load_spec(const char *path, const char *input, int64_t batch, int n_inputs)
{
    size_t n;
    char *bytes = slurp(path, &n);
    CHECK(bytes != NULL, "cannot read %s", path);
    if (!bytes) return NULL;
    const char *const inputs[] = { input };
    MemestLoadSettings ls;
    memest_load_default_settings(&ls);
    ls.inputs = inputs;
    ls.n_inputs = n_inputs;
    ls.batch = batch;
    MemestModel *m = NULL;
    char err[1024] = "";
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int rc = memest_model_load_memory(&m, bytes, n, name, &ls, err, sizeof(err));
    memset(bytes, 0, n); /* anything the model still read from here would be zeros */
    free(bytes);
    CHECK(rc == 0 && m, "load_memory: %d %s", rc, err);
    return m;
}

/* resnet18, 3x224x224 */
static MemestModel *load(const char *path, int64_t batch, int n_inputs)
{
    return load_spec(path, "3x224x224", batch, n_inputs);
}

static MemestAnalysis *analyze(const MemestModel *m, MemestConvention conv)
{
    MemestAnalyzeSettings as;
    memest_analyze_default_settings(&as);
    as.convention = conv;
    MemestAnalysis *a = NULL;
    char err[1024] = "";
    int rc = memest_analyze(m, &as, &a, err, sizeof(err));
    CHECK(rc == 0 && a, "analyze: %s", err);
    if (rc < 0) return NULL;
    MemestMemorySettings ms;
    memest_memory_default_settings(&ms);
    ms.mode = MEMEST_RUN_TRAIN;
    ms.optimizer = MEMEST_OPT_ADAM;
    rc = memest_set_memory(a, &ms, err, sizeof(err));
    CHECK(rc == 0, "set_memory: %s", err);
    return a;
}

int main(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/models/onnx/resnet18_op17_eval.onnx", argc > 1 ? argv[1] : ".");

    /* the version three ways, and errors by name */
    char want[64];
    snprintf(want, sizeof(want), "%d.%d.%d", MEMEST_VERSION_MAJOR, MEMEST_VERSION_MINOR, MEMEST_VERSION_PATCH);
    CHECK(!strcmp(want, MEMEST_VERSION_STRING) && !strcmp(memest_version(), MEMEST_VERSION_STRING),
          "version macros %s, string %s, library %s", want, MEMEST_VERSION_STRING, memest_version());
    CHECK(strstr(memest_strerror(MEMEST_ERR_NOMEM), "memory") && strstr(memest_strerror(MEMEST_ERR_STALE), "binding") &&
          strcmp(memest_strerror(MEMEST_ERR_INVALID), memest_strerror(MEMEST_ERR_IO)),
          "memest_strerror does not tell the errors apart");

    /* bad bytes: an error with a message naming the model, no model */
    MemestModel *bad = NULL;
    char err[1024] = "";
    int rc = memest_model_load_memory(&bad, "\x08\x07garbage", 9, "junk.onnx", NULL, err, sizeof(err));
    CHECK(rc == MEMEST_ERR_INVALID && !bad && strstr(err, "junk.onnx"), "garbage: %d '%s'", rc, err);

    MemestModel *m = load(path, 1, 1);
    if (!m) return 1;
    MemestAnalysis *a1 = analyze(m, MEMEST_CONVENTION_DEFAULT);
    MemestTotals t1 = { 0 }, t4 = { 0 };
    MemestMemory s1[2] = { 0 }, s4[2] = { 0 };
    CHECK(a1 && memest_totals(a1, &t1) == 0 && memest_memory_steps(a1, s1, 2) == 2, "batch 1: no totals or steps");

    /* batch 4 on the same model: batch 1's analysis is stale, not wrong */
    rc = memest_model_set_batch(m, 4, err, sizeof(err));
    CHECK(rc == 0, "set_batch 4: %s", err);
    char *text = NULL;
    CHECK(memest_report_string(a1, MEMEST_FORMAT_JSON, &text, NULL) == MEMEST_ERR_STALE && !text,
          "a report of batch 1 after re-binding to 4");
    MemestAnalysis *a4 = analyze(m, MEMEST_CONVENTION_DEFAULT);
    CHECK(a4 && memest_totals(a4, &t4) == 0 && memest_memory_steps(a4, s4, 2) == 2, "batch 4: no totals or steps");
    CHECK(t4.params == t1.params && t1.params == 11684712,
          "params %llu at batch 4, %llu at 1 (resnet18, BatchNorm folded: 11,684,712, golden/truth)",
          (unsigned long long)t4.params, (unsigned long long)t1.params);
    CHECK(t1.macs > 0 && t4.macs == 4 * t1.macs && t4.output_bytes == 4 * t1.output_bytes,
          "MACs %llu at batch 4, %llu at 1: not 4 times", (unsigned long long)t4.macs, (unsigned long long)t1.macs);
    CHECK(s4[1].peak > s1[1].peak && s4[1].baseline > s1[1].baseline,
          "training peak %llu at batch 4, %llu at 1", (unsigned long long)s4[1].peak, (unsigned long long)s1[1].peak);

    /* the JSON report into a buffer: the keys, the batch and the params */
    size_t len = 0;
    rc = a4 ? memest_report_string(a4, MEMEST_FORMAT_JSON, &text, &len) : -1;
    CHECK(rc == 0 && text && len == strlen(text), "report_string: %d", rc);
    if (text) {
        CHECK(strstr(text, "\"schema\":\t\"memest-report\""), "no schema key");
        CHECK(strstr(text, "\"model\":\t\"resnet18_op17_eval.onnx\""), "the model is not named as loaded");
        CHECK(strstr(text, "\"shape\":\t[4, 3, 224, 224]"), "the input is not 4x3x224x224");
        CHECK(strstr(text, "\"params\":\t11684712"), "no params total");
        CHECK(strstr(text, "\"layers\":\t[") && strstr(text, "\"memory\":\t{") && strstr(text, "\"mode\":\t\"train\""),
              "no layers or training memory");
        /* the same bytes through a callback; a refusing one is an I/O error */
        size_t counted = 0;
        CHECK(memest_report_write(a4, MEMEST_FORMAT_JSON, count_bytes, &counted) == 0 && counted == len,
              "callback got %zu bytes, the buffer %zu", counted, len);
        CHECK(memest_report_write(a4, MEMEST_FORMAT_JSON, refuse, NULL) == MEMEST_ERR_IO, "a refusing callback");
    }

    /* a fresh load at batch 4 reports exactly what the re-bound model does */
    MemestModel *fresh = load(path, 4, 1);
    MemestAnalysis *af = fresh ? analyze(fresh, MEMEST_CONVENTION_DEFAULT) : NULL;
    char *ftext = NULL;
    CHECK(af && memest_report_string(af, MEMEST_FORMAT_JSON, &ftext, NULL) == 0 && text && !strcmp(text, ftext),
          "re-bound to batch 4 and loaded at batch 4 give different reports");
    memest_free(ftext);
    memest_analysis_free(&af);
    memest_model_free(&fresh);
    memest_free(text);

    /* another convention on the same binding: both analyses stay current */
    MemestAnalysis *ts = analyze(m, MEMEST_CONVENTION_TORCHSTAT);
    text = NULL;
    CHECK(ts && memest_report_string(ts, MEMEST_FORMAT_TABLE, &text, NULL) == 0 && strstr(text, "Total MAdd"),
          "torchstat table");
    memest_free(text);
    text = NULL;
    CHECK(a4 && memest_report_string(a4, MEMEST_FORMAT_CSV, &text, NULL) == 0 && !strncmp(text, "module,type,", 12),
          "the default analysis after a second one");
    memest_free(text);

    /* a GPU by value: capacity, and the largest batch, with the model's own
     * batch back afterwards */
    MemestGpu gpu;
    CHECK(memest_gpu_find("RTX 3090", NULL, 0, &gpu) == 0 && gpu.memory == UINT64_C(24) << 30, "rtx3090 by name");
    CHECK(memest_gpu_find("no-such-gpu", NULL, 0, &gpu) == MEMEST_ERR_INVALID, "an unknown GPU is found");
    memest_gpu_find("rtx3090", NULL, 0, &gpu);
    if (a4) {
        CHECK(memest_set_device(a4, &gpu, 0) == 0, "set_device");
        MemestTiming tm;
        CHECK(memest_timing(a4, &tm) == 0 && tm.batch == 4 && tm.forward_s > 0, "timing at batch 4");
        MemestMemorySettings ms;
        memest_memory_default_settings(&ms);
        ms.mode = MEMEST_RUN_TRAIN;
        ms.optimizer = MEMEST_OPT_ADAM;
        MemestMaxBatch mb;
        rc = memest_max_batch(m, &ms, gpu.memory, &mb, NULL, NULL, err, sizeof(err));
        CHECK(rc == 0 && mb.batch > 4 && mb.needed <= gpu.memory && mb.needed_next > gpu.memory, "max batch %lld: %s",
              (long long)mb.batch, err);
        text = NULL;
        CHECK(memest_report_string(a4, MEMEST_FORMAT_JSON, &text, NULL) == 0 && strstr(text, "\"shape\":\t[4, 3, 224, 224]"),
              "after max_batch the model is not back at batch 4, or its analysis went stale");
        memest_free(text);
    }

    /* the symbolic batch dim ("batch" in the file) bound by name: the same
     * figures; a bad binding is refused and the model keeps its own (no
     * batch given: a batch of 1 would conflict with batch=4) */
    MemestModel *byname = load(path, 0, 0);
    MemestAnalysis *ad = NULL;
    if (byname) {
        static const char *const dims[] = { "batch=4" }, *const bad_dims[] = { "batch=four" };
        rc = memest_model_set_dims(byname, dims, 1, err, sizeof(err));
        CHECK(rc == 0, "set_dims batch=4: %s", err);
        ad = analyze(byname, MEMEST_CONVENTION_DEFAULT);
        MemestTotals td = { 0 };
        CHECK(ad && memest_totals(ad, &td) == 0 && td.macs == t4.macs, "batch=4 by name: %llu MACs, batch 4: %llu",
              (unsigned long long)td.macs, (unsigned long long)t4.macs);
        rc = memest_model_set_dims(byname, bad_dims, 1, err, sizeof(err));
        CHECK(rc == MEMEST_ERR_INVALID && strstr(err, "batch=four"), "set_dims batch=four: %d '%s'", rc, err);
        text = NULL;
        CHECK(ad && memest_report_string(ad, MEMEST_FORMAT_JSON, &text, NULL) == 0 && strstr(text, "\"shape\":\t[4, 3, 224, 224]"),
              "a refused binding changed the model");
        memest_free(text);
    }
    memest_analysis_free(&ad);
    memest_model_free(&byname);

    /* gpt_like's shape arithmetic (Shape, Gather, Concat into Reshape) is
     * folded again for the new batch: re-bound, it reports what a fresh
     * load does */
    char gpath[4096];
    snprintf(gpath, sizeof(gpath), "%s/models/onnx/zoo/gpt_like.onnx", argc > 1 ? argv[1] : ".");
    MemestModel *g1 = load_spec(gpath, "input_ids=128:int64", 1, 1), *g3 = load_spec(gpath, "input_ids=128:int64", 3, 1);
    MemestAnalysis *ga = NULL, *gb = NULL;
    char *gt1 = NULL, *gt3 = NULL;
    if (g1 && g3) {
        ga = analyze(g1, MEMEST_CONVENTION_DEFAULT); /* folded at batch 1 first */
        memest_analysis_free(&ga);
        CHECK(memest_model_set_batch(g1, 3, err, sizeof(err)) == 0, "gpt_like set_batch 3: %s", err);
        ga = analyze(g1, MEMEST_CONVENTION_DEFAULT);
        gb = analyze(g3, MEMEST_CONVENTION_DEFAULT);
        CHECK(ga && gb && memest_report_string(ga, MEMEST_FORMAT_JSON, &gt1, NULL) == 0 &&
                  memest_report_string(gb, MEMEST_FORMAT_JSON, &gt3, NULL) == 0 && !strcmp(gt1, gt3) &&
                  strstr(gt1, "\"shape\":\t[3, 128]"),
              "gpt_like re-bound to batch 3 and loaded at batch 3 give different reports");
    }
    memest_free(gt1);
    memest_free(gt3);
    memest_analysis_free(&ga);
    memest_analysis_free(&gb);
    memest_model_free(&g1);
    memest_model_free(&g3);

    /* a JSON model from memory reports what the same file loaded by path does */
    char jpath[4096];
    snprintf(jpath, sizeof(jpath), "%s/models/resnet18.json", argc > 1 ? argv[1] : ".");
    size_t jn;
    char *jbytes = slurp(jpath, &jn), *from_mem = NULL, *from_path = NULL;
    MemestModel *jm = NULL, *jp = NULL;
    MemestAnalysis *ja = NULL, *jb = NULL;
    CHECK(jbytes && memest_model_load_memory(&jm, jbytes, jn, jpath, NULL, err, sizeof(err)) == 0, "JSON from memory: %s", err);
    free(jbytes);
    CHECK(memest_model_load(&jp, jpath, NULL, err, sizeof(err)) == 0, "JSON from its path: %s", err);
    if (jm && jp) {
        ja = analyze(jm, MEMEST_CONVENTION_FVCORE);
        jb = analyze(jp, MEMEST_CONVENTION_FVCORE);
        CHECK(ja && jb && memest_report_string(ja, MEMEST_FORMAT_TABLE, &from_mem, NULL) == 0 &&
                  memest_report_string(jb, MEMEST_FORMAT_TABLE, &from_path, NULL) == 0 && !strcmp(from_mem, from_path),
              "resnet18.json: the report from memory differs from the one from its path");
    }
    memest_free(from_mem);
    memest_free(from_path);
    memest_analysis_free(&ja);
    memest_analysis_free(&jb);
    memest_model_free(&jm);
    memest_model_free(&jp);

    memest_analysis_free(&ts);
    memest_analysis_free(&a4);
    memest_analysis_free(&a1);
    memest_model_free(&m);
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
