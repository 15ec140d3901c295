/* memest-measure's report on synthetic measurements: relative errors,
 * the table, the JSON (parsed back), and the composition of memest's
 * predictions for a real model with a made-up measurement.
 *
 * usage: test_report ROOT */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compose.h"
#include "report.h"

#include "../check.h"

static bool near(double a, double b) { return fabs(a - b) <= 1e-6 * (fabs(b) + 1); }

/* the text f got, NUL-terminated (caller frees) */
static char *render(const MeMeasureReport *r, MeReportFormat fmt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    me_measure_report_write(f, r, fmt);
    fclose(f);
    return buf;
}

static const cJSON *find_row(const cJSON *arr, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return e;
    }
    return NULL;
}

static void synthetic(void)
{
    double e;
    CHECK(me_rel_error(true, 110, true, 100, &e) && near(e, 10), "110 vs 100: %g", e);
    CHECK(me_rel_error(true, 90, true, 100, &e) && near(e, -10), "90 vs 100: %g", e);
    CHECK(!me_rel_error(true, 1, true, 0, &e), "measured 0 has no relative error");
    CHECK(!me_rel_error(false, 1, true, 1, &e) && !me_rel_error(true, 1, false, 1, &e), "absent sides");
    char buf[64];
    me_format_error(buf, sizeof(buf), true, 103.25, true, 100);
    CHECK(!strcmp(buf, "+3.2%") || !strcmp(buf, "+3.3%"), "format +3.25%%: %s", buf);
    me_format_error(buf, sizeof(buf), true, 50, true, 200);
    CHECK(!strcmp(buf, "-75.0%"), "format -75%%: %s", buf);
    me_format_error(buf, sizeof(buf), true, 100.01, true, 100);
    CHECK(!strcmp(buf, "+0.0%"), "format ~0: %s", buf);
    me_format_error(buf, sizeof(buf), false, 0, true, 100);
    CHECK(!strcmp(buf, "-"), "format absent: %s", buf);
    me_format_value(buf, sizeof(buf), ME_UNIT_BYTES, true, 1.5 * 1048576);
    CHECK(!strcmp(buf, "1.50 MiB"), "bytes: %s", buf);
    me_format_value(buf, sizeof(buf), ME_UNIT_SECONDS, true, 0.0123);
    CHECK(!strcmp(buf, "12.300 ms"), "seconds: %s", buf);
    me_format_value(buf, sizeof(buf), ME_UNIT_SECONDS, false, 1);
    CHECK(!strcmp(buf, "-"), "absent value: %s", buf);

    MeCompare mem[] = {
        { .name = "peak tensors (requested)", .unit = ME_UNIT_BYTES, .has_pred = true, .pred = 100 * 1048576.0, .has_meas = true, .meas = 80 * 1048576.0 },
        { .name = "largest cuDNN workspace", .unit = ME_UNIT_BYTES, .has_meas = true, .meas = 3 * 1048576.0 },
    };
    MeCompare tim[] = {
        { .name = "forward", .unit = ME_UNIT_SECONDS, .has_pred = true, .pred = 0.002, .has_meas = true, .meas = 0.004 },
    };
    MeLayerCompare lay[] = {
        { .name = "layer1.0.conv1", .op = "Conv", .phase = MEMEST_PHASE_FORWARD, .has_live = true, .pred_live = 10 * 1048576.0,
          .meas_live = 10 * 1048576.0, .has_time = true, .pred_s = 1e-4, .meas_s = 2e-4 },
        { .name = "flatten", .op = "Flatten", .phase = MEMEST_PHASE_BACKWARD },
    };
    MeMeasureReport r = { .model = "m\"odel.json", .mode = "training", .optimizer = "sgd", .batch = 32, .device = "Test GPU",
                          .software = "driver 1.0", .plan_matches = true, .plan_detail = "12 allocations and frees", .warmup = 3,
                          .iterations = 10, .memory = mem, .n_memory = 2, .time = tim, .n_time = 1, .layers = lay, .n_layers = 2 };
    char *t = render(&r, ME_REPORT_TABLE);
    CHECK(t != NULL, "table rendered");
    if (t) {
        CHECK(strstr(t, "training (sgd), batch 32") != NULL, "header:\n%s", t);
        CHECK(strstr(t, "100.00 MiB") && strstr(t, "80.00 MiB") && strstr(t, "+25.0%"), "peak row:\n%s", t);
        CHECK(strstr(t, "2.000 ms") && strstr(t, "4.000 ms") && strstr(t, "-50.0%"), "time row:\n%s", t);
        const char *ws = strstr(t, "largest cuDNN workspace");
        CHECK(ws && strstr(ws, "-") && strstr(ws, "3.00 MiB"), "measured-only row:\n%s", t);
        CHECK(strstr(t, "layer1.0.conv1") && strstr(t, "0.1000") && strstr(t, "0.2000"), "layer row:\n%s", t);
        CHECK(strstr(t, "error = (predicted - measured) / measured") != NULL, "the error's definition is stated");
        free(t);
    }
    r.plan_matches = false;
    r.plan_detail = "event 7 differs";
    t = render(&r, ME_REPORT_TABLE);
    CHECK(t && strstr(t, "DIFFERS from memest's timeline: event 7 differs"), "a plan difference is shown");
    free(t);

    char *js = render(&r, ME_REPORT_JSON);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    CHECK(root != NULL, "JSON parses:\n%s", js ? js : "(null)");
    if (root) {
        CHECK(!strcmp(cJSON_GetObjectItem(root, "format")->valuestring, "memest-measure"), "format");
        CHECK(cJSON_GetObjectItem(root, "version")->valuedouble == 1, "version");
        CHECK(!strcmp(cJSON_GetObjectItem(root, "model")->valuestring, "m\"odel.json"), "escaped model name");
        CHECK(cJSON_GetObjectItem(root, "batch")->valuedouble == 32, "batch");
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "plan"), "matches_memest")), "plan flag");
        const cJSON *pk = find_row(cJSON_GetObjectItem(root, "memory"), "peak tensors (requested)");
        CHECK(pk && cJSON_GetObjectItem(pk, "predicted")->valuedouble == 100 * 1048576.0, "predicted bytes exact");
        CHECK(pk && near(cJSON_GetObjectItem(pk, "error_pct")->valuedouble, 25), "error_pct 25");
        CHECK(pk && !strcmp(cJSON_GetObjectItem(pk, "unit")->valuestring, "bytes"), "unit");
        const cJSON *w = find_row(cJSON_GetObjectItem(root, "memory"), "largest cuDNN workspace");
        CHECK(w && cJSON_IsNull(cJSON_GetObjectItem(w, "predicted")) && cJSON_IsNull(cJSON_GetObjectItem(w, "error_pct")),
              "absent prediction is null");
        const cJSON *fw = find_row(cJSON_GetObjectItem(root, "time"), "forward");
        CHECK(fw && near(cJSON_GetObjectItem(fw, "measured")->valuedouble, 0.004) && near(cJSON_GetObjectItem(fw, "error_pct")->valuedouble, -50),
              "time row");
        const cJSON *layers = cJSON_GetObjectItem(root, "layers");
        CHECK(cJSON_GetArraySize(layers) == 2, "two layers");
        const cJSON *l0 = cJSON_GetArrayItem(layers, 0), *l1 = cJSON_GetArrayItem(layers, 1);
        CHECK(l0 && near(cJSON_GetObjectItem(l0, "time_error_pct")->valuedouble, -50) &&
              near(cJSON_GetObjectItem(l0, "live_error_pct")->valuedouble, 0), "layer errors");
        CHECK(l1 && !strcmp(cJSON_GetObjectItem(l1, "phase")->valuestring, "backward") &&
              cJSON_IsNull(cJSON_GetObjectItem(l1, "measured_s")), "absent layer figures are null");
        cJSON_Delete(root);
    }
    free(js);
}

/* memest's predictions for resnet18 training beside a made-up measurement */
static void composed(const char *root)
{
    char path[4096], err[1024];
    snprintf(path, sizeof(path), "%s/models/resnet18.json", root);
    MemestLoadSettings ls = { .batch = 2 };
    MemestModel *m = NULL;
    if (memest_model_load(&m, path, &ls, err, sizeof(err)) < 0) {
        CHECK(0, "load: %s", err);
        return;
    }
    MemestAnalyzeSettings as = { 0 };
    MemestAnalysis *a = NULL;
    if (memest_analyze(m, &as, &a, err, sizeof(err)) < 0) {
        CHECK(0, "analyze: %s", err);
        memest_model_free(&m);
        return;
    }
    MePlan plans[2];
    MePlan *pp[2] = { &plans[0], &plans[1] };
    for (int k = 0; k < 2; k++) {
        MePlanSettings ps = { .mode = MEMEST_RUN_TRAIN, .optimizer = MEMEST_OPT_SGD, .step = k + 1 };
        CHECK(me_plan_build(&plans[k], m, &ps, err, sizeof(err)) >= 0, "plan: %s", err);
    }
    MemestMemorySettings ms = { .mode = MEMEST_RUN_TRAIN, .optimizer = MEMEST_OPT_SGD, .runtime = MEMEST_RUNTIME_CUDA, .record_series = 1,
                                .cuda_context = 500u << 20 };
    CHECK(memest_set_memory(a, &ms, err, sizeof(err)) >= 0, "memory: %s", err);
    MemestGpu gpu = { .name = "test", .memory = UINT64_C(80) << 30, .bandwidth = 2e12, .fp32_flops = 5e13, .sms = 100 };
    CHECK(memest_set_device(a, &gpu, 0) >= 0, "device");

    /* measured: peaks 10 % above, context 600 MiB, layers twice as slow,
     * live bytes exactly memest's timeline */
    MeMeasureResult r;
    memset(&r, 0, sizeof(r));
    r.context_bytes = 600u << 20;
    r.cublas_own_bytes = 8519680;
    r.device_used_peak = UINT64_C(2) << 30;
    r.warmup = 1;
    r.iterations = 5;
    snprintf(r.conv, sizeof(r.conv), "cuDNN");
    r.fwd_s = calloc((size_t)m->g.nn, sizeof(double));
    r.bwd_s = calloc((size_t)m->g.nn, sizeof(double));
    for (int i = 0; i < m->g.nn; i++) {
        r.fwd_s[i] = 2 * a->time_s[i];
        r.bwd_s[i] = 4 * a->time_s[i];
        r.forward_s += r.fwd_s[i];
        r.backward_s += r.bwd_s[i];
    }
    for (int k = 0; k < 2; k++) {
        const MemestSeriesPoint *pts;
        int np;
        memest_memory_series(a, k, &pts, &np);
        MeStepMeasure *s = &r.step[k];
        s->measured = true;
        s->peak_plan = a->memory.mem[k].peak + a->memory.mem[k].peak / 10;
        s->peak_all = s->peak_plan;
        s->device_peak = a->memory.mem[k].peak_allocated;
        s->n_notes = np;
        s->note_live = calloc((size_t)np + 1, sizeof(uint64_t));
        for (int i = 0; i < np; i++)
            for (int c = 0; c < MEMEST_MEM_COUNT; c++) s->note_live[i] += pts[i].live[c];
    }
    MeComposed c;
    CHECK(me_measure_compose(a, pp, 2, &r, &c) >= 0, "compose");
    const MeMeasureReport *rep = &c.report;
    bool seen_peak = false, seen_ctx = false;
    for (int i = 0; i < rep->n_memory; i++) {
        const MeCompare *x = &rep->memory[i];
        double e;
        if (!strcmp(x->name, "peak tensors (requested), steady")) {
            seen_peak = true;
            CHECK(me_rel_error(x->has_pred, x->pred, x->has_meas, x->meas, &e) && e < -9.0 && e > -9.2, "peak error %g", e);
            CHECK(x->pred == (double)a->memory.mem[1].peak, "predicted peak is memest's");
        }
        if (!strcmp(x->name, "CUDA context")) {
            seen_ctx = true;
            CHECK(x->pred == 500 << 20 && me_rel_error(x->has_pred, x->pred, x->has_meas, x->meas, &e) && near(e, -100.0 / 6), "context %g", e);
        }
        if (!strcmp(x->name, "largest cuDNN workspace")) CHECK(!x->has_pred && x->has_meas, "cuDNN workspace has no prediction");
    }
    CHECK(seen_peak && seen_ctx, "peak and context rows");
    int fwd = 0, bwd = 0, timed = 0;
    for (int i = 0; i < rep->n_layers; i++) {
        const MeLayerCompare *l = &rep->layers[i];
        fwd += l->phase == MEMEST_PHASE_FORWARD;
        bwd += l->phase == MEMEST_PHASE_BACKWARD;
        CHECK(!l->has_live || l->pred_live == l->meas_live, "%s: live %g vs %g", l->name, l->pred_live, l->meas_live);
        if (l->has_time && l->pred_s > 0) {
            timed++;
            double e;
            me_rel_error(true, l->pred_s, true, l->meas_s, &e);
            CHECK(near(e, -50), "%s %d: time error %g", l->name, l->phase, e);
        }
    }
    CHECK(fwd >= 60 && bwd >= 40 && timed >= 60, "layers: %d forward, %d backward, %d timed", fwd, bwd, timed);
    char *js = render(rep, ME_REPORT_JSON);
    cJSON *j = js ? cJSON_Parse(js) : NULL;
    CHECK(j != NULL, "composed JSON parses");
    cJSON_Delete(j);
    free(js);
    me_composed_free(&c);
    for (int k = 0; k < 2; k++) {
        free(r.step[k].note_live);
        me_plan_free(&plans[k]);
    }
    free(r.fwd_s);
    free(r.bwd_s);
    memest_analysis_free(&a);
    memest_model_free(&m);
}

int main(int argc, char **argv)
{
    synthetic();
    if (argc > 1) composed(argv[1]);
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
