/* Issue 10 through the public API: memest_model_set_batch on a fixed-size
 * export (models/onnx/static, tests/bind/export_static.py) re-binds its
 * batch as --batch does, and back; the figures equal those of the
 * dynamic-axes export of the same module at the same batch.
 * usage: test_bind_api SOURCE_ROOT */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <memest/memest.h>

#include "../check.h"

static MemestModel *load(const char *root, const char *stem, const char *input)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/models/onnx/static/%s.onnx", root, stem);
    const char *const inputs[] = { input };
    MemestLoadSettings ls;
    memest_load_default_settings(&ls);
    ls.inputs = inputs;
    ls.n_inputs = input ? 1 : 0;
    MemestModel *m = NULL;
    char err[1024] = "";
    int rc = memest_model_load(&m, path, &ls, err, sizeof(err));
    CHECK(rc == 0 && m, "load %s: %s", stem, err);
    return m;
}

/* Totals and the training timeline's two peaks (Adam) of m as bound now. */
static int figures(const MemestModel *m, MemestTotals *t, MemestMemory s[2])
{
    MemestAnalyzeSettings as;
    memest_analyze_default_settings(&as);
    MemestAnalysis *a = NULL;
    char err[1024] = "";
    int rc = memest_analyze(m, &as, &a, err, sizeof(err));
    MemestMemorySettings ms;
    memest_memory_default_settings(&ms);
    ms.mode = MEMEST_RUN_TRAIN;
    ms.optimizer = MEMEST_OPT_ADAM;
    if (rc == 0) rc = memest_set_memory(a, &ms, err, sizeof(err));
    if (rc == 0) rc = memest_totals(a, t);
    if (rc == 0 && memest_memory_steps(a, s, 2) != 2) rc = -1;
    CHECK(rc == 0, "analysis: %d %s", rc, err);
    memest_analysis_free(&a);
    return rc;
}

static void same(const char *what, const MemestModel *a, const MemestModel *b)
{
    MemestTotals ta = { 0 }, tb = { 0 };
    MemestMemory sa[2] = { 0 }, sb[2] = { 0 };
    if (figures(a, &ta, sa) < 0 || figures(b, &tb, sb) < 0) return;
    CHECK(ta.params == tb.params && ta.macs == tb.macs, "%s: params %llu / %llu, MACs %llu / %llu", what,
          (unsigned long long)ta.params, (unsigned long long)tb.params, (unsigned long long)ta.macs, (unsigned long long)tb.macs);
    CHECK(sa[0].peak == sb[0].peak && sa[1].peak == sb[1].peak, "%s: peaks %llu %llu static, %llu %llu dynamic", what,
          (unsigned long long)sa[0].peak, (unsigned long long)sa[1].peak, (unsigned long long)sb[0].peak,
          (unsigned long long)sb[1].peak);
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : ".";
    char err[1024] = "";
    MemestModel *st = load(root, "resnet18_static", NULL), *dy = load(root, "resnet18_dyn", NULL);
    MemestModel *te = load(root, "tiny_enc_static", NULL), *td = load(root, "tiny_enc_dyn", "64");
    if (!st || !dy || !te || !td) return 1;
    MemestTotals t1 = { 0 }, t8 = { 0 }, back = { 0 };
    MemestMemory s[2];
    figures(st, &t1, s);
    same("resnet18 at the export's batch 1", st, dy);
    CHECK(memest_model_set_batch(st, 8, err, sizeof(err)) == 0, "set_batch 8 on a batch-1 export: %s", err);
    CHECK(memest_model_set_batch(dy, 8, err, sizeof(err)) == 0, "set_batch 8: %s", err);
    figures(st, &t8, s);
    CHECK(t8.macs == 8 * t1.macs, "MACs %llu at batch 8, %llu at 1", (unsigned long long)t8.macs, (unsigned long long)t1.macs);
    same("resnet18 re-bound to batch 8", st, dy);
    CHECK(memest_model_set_batch(st, 1, err, sizeof(err)) == 0, "set_batch 1: %s", err);
    figures(st, &back, s);
    CHECK(back.macs == t1.macs && back.output_bytes == t1.output_bytes, "back at batch 1: MACs %llu, first %llu",
          (unsigned long long)back.macs, (unsigned long long)t1.macs);
    /* the Reshapes [1, 64, 4, 16] bake the batch in: re-written per binding */
    for (int64_t b = 4; b >= 2; b -= 2) {
        CHECK(memest_model_set_batch(te, b, err, sizeof(err)) == 0, "tiny_enc set_batch %lld: %s", (long long)b, err);
        CHECK(memest_model_set_batch(td, b, err, sizeof(err)) == 0, "tiny_enc dyn set_batch %lld: %s", (long long)b, err);
        same(b == 4 ? "tiny_enc at batch 4" : "tiny_enc at batch 2", te, td);
    }
    const char *const dims[] = { "seq=96" };
    CHECK(memest_model_set_dims(te, dims, 1, err, sizeof(err)) < 0 && strstr(err, "no symbolic dim 'seq'"),
          "set_dims on a static export: '%s'", err);
    memest_model_free(&st);
    memest_model_free(&dy);
    memest_model_free(&te);
    memest_model_free(&td);
    printf("%d checks, %d failures\n", checks, fails);
    return fails ? 1 : 0;
}
