/* memest-measure's report (report.h): a table, or JSON ("memest-measure/1",
 * doc/device-profile.md). */
#include <math.h>
#include <string.h>

#include "profile.h"
#include "report.h"

bool me_rel_error(bool has_pred, double pred, bool has_meas, double meas, double *pct)
{
    if (!has_pred || !has_meas || !(meas != 0) || !isfinite(pred) || !isfinite(meas)) return false;
    *pct = (pred - meas) / meas * 100.0;
    return isfinite(*pct);
}

void me_format_error(char *buf, size_t n, bool has_pred, double pred, bool has_meas, double meas)
{
    double e;
    if (!me_rel_error(has_pred, pred, has_meas, meas, &e)) snprintf(buf, n, "-");
    else if (fabs(e) < 0.05) snprintf(buf, n, "+0.0%%");
    else snprintf(buf, n, "%+.1f%%", e);
}

void me_format_value(char *buf, size_t n, MeUnit unit, bool has, double v)
{
    if (!has) snprintf(buf, n, "-");
    else if (unit == ME_UNIT_BYTES) snprintf(buf, n, "%.2f MiB", v / 1048576.0);
    else snprintf(buf, n, "%.3f ms", v * 1e3);
}

static const char *phase_name(MemestPhase p)
{
    return p == MEMEST_PHASE_FORWARD ? "forward" : p == MEMEST_PHASE_BACKWARD ? "backward" : "optimizer";
}

static void rows(FILE *f, const char *title, const MeCompare *c, int n)
{
    fprintf(f, "\n%-44s %14s %14s %9s\n", title, "predicted", "measured", "error");
    for (int i = 0; i < n; i++) {
        char p[48], m[48], e[32];
        me_format_value(p, sizeof(p), c[i].unit, c[i].has_pred, c[i].pred);
        me_format_value(m, sizeof(m), c[i].unit, c[i].has_meas, c[i].meas);
        me_format_error(e, sizeof(e), c[i].has_pred, c[i].pred, c[i].has_meas, c[i].meas);
        fprintf(f, "%-44.44s %14s %14s %9s\n", c[i].name, p, m, e);
    }
}

static void table(FILE *f, const MeMeasureReport *r)
{
    fprintf(f, "memest-measure: %s, %s", r->model ? r->model : "?", r->mode ? r->mode : "?");
    if (r->optimizer && r->optimizer[0]) fprintf(f, " (%s)", r->optimizer);
    fprintf(f, ", batch %lld\n", (long long)r->batch);
    if (r->device) fprintf(f, "device: %s\n", r->device);
    if (r->software) fprintf(f, "software: %s\n", r->software);
    if (r->conv) fprintf(f, "convolutions: %s\n", r->conv);
    if (r->profile) fprintf(f, "roofline GPU: %s\n", r->profile);
    fprintf(f, "plan: %s%s\n", r->plan_matches ? "" : "DIFFERS from memest's timeline: ", r->plan_detail ? r->plan_detail : "");
    fprintf(f, "timing: %d steps after %d warm-up; error = (predicted - measured) / measured\n", r->iterations, r->warmup);
    rows(f, "memory", r->memory, r->n_memory);
    rows(f, "time per step", r->time, r->n_time);
    if (!r->n_layers) return;
    fprintf(f, "\n%-32s %-18s %-9s %11s %11s %8s %11s %11s %8s\n", "layer", "op", "phase", "live pred", "live meas", "error",
            "time pred", "time meas", "error");
    for (int i = 0; i < r->n_layers; i++) {
        const MeLayerCompare *l = &r->layers[i];
        char lp[32], lm[32], le[32], tp[32], tm[32], te[32];
        if (l->has_live) {
            snprintf(lp, sizeof(lp), "%.2f", l->pred_live / 1048576.0);
            snprintf(lm, sizeof(lm), "%.2f", l->meas_live / 1048576.0);
        } else {
            snprintf(lp, sizeof(lp), "-");
            snprintf(lm, sizeof(lm), "-");
        }
        me_format_error(le, sizeof(le), l->has_live, l->pred_live, l->has_live, l->meas_live);
        if (l->has_time) {
            snprintf(tp, sizeof(tp), "%.4f", l->pred_s * 1e3);
            snprintf(tm, sizeof(tm), "%.4f", l->meas_s * 1e3);
        } else {
            snprintf(tp, sizeof(tp), "-");
            snprintf(tm, sizeof(tm), "-");
        }
        me_format_error(te, sizeof(te), l->has_time, l->pred_s, l->has_time, l->meas_s);
        fprintf(f, "%-32.32s %-18.18s %-9s %11s %11s %8s %11s %11s %8s\n", l->name ? l->name : "?", l->op ? l->op : "?",
                phase_name(l->phase), lp, lm, le, tp, tm, te);
    }
    fprintf(f, "(live: MiB alive at the layer's point of memest's timeline; time: ms per step)\n");
}

static void jnum(FILE *f, MeUnit unit, bool has, double v)
{
    if (!has || !isfinite(v)) fputs("null", f);
    else if (unit == ME_UNIT_BYTES) fprintf(f, "%.0f", v);
    else fprintf(f, "%.9g", v);
}

static void jerr(FILE *f, bool hp, double p, bool hm, double m)
{
    double e;
    if (me_rel_error(hp, p, hm, m, &e)) fprintf(f, "%.4f", e);
    else fputs("null", f);
}

static void jrows(FILE *f, const char *key, const MeCompare *c, int n)
{
    fprintf(f, "  \"%s\": [", key);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        me_json_string(f, c[i].name);
        fprintf(f, ", \"unit\": \"%s\", \"predicted\": ", c[i].unit == ME_UNIT_BYTES ? "bytes" : "seconds");
        jnum(f, c[i].unit, c[i].has_pred, c[i].pred);
        fputs(", \"measured\": ", f);
        jnum(f, c[i].unit, c[i].has_meas, c[i].meas);
        fputs(", \"error_pct\": ", f);
        jerr(f, c[i].has_pred, c[i].pred, c[i].has_meas, c[i].meas);
        fputc('}', f);
    }
    fprintf(f, "%s],\n", n ? "\n  " : "");
}

static void json(FILE *f, const MeMeasureReport *r)
{
    fputs("{\n  \"format\": \"memest-measure\",\n  \"version\": 1,\n  \"model\": ", f);
    me_json_string(f, r->model);
    fputs(",\n  \"mode\": ", f);
    me_json_string(f, r->mode);
    fputs(",\n  \"optimizer\": ", f);
    me_json_string(f, r->optimizer && r->optimizer[0] ? r->optimizer : NULL);
    fprintf(f, ",\n  \"batch\": %lld,\n  \"device\": ", (long long)r->batch);
    me_json_string(f, r->device);
    fputs(",\n  \"software\": ", f);
    me_json_string(f, r->software);
    fputs(",\n  \"convolutions\": ", f);
    me_json_string(f, r->conv);
    fputs(",\n  \"roofline_gpu\": ", f);
    me_json_string(f, r->profile);
    fprintf(f, ",\n  \"plan\": {\"matches_memest\": %s, \"detail\": ", r->plan_matches ? "true" : "false");
    me_json_string(f, r->plan_detail);
    fprintf(f, "},\n  \"warmup\": %d,\n  \"iterations\": %d,\n", r->warmup, r->iterations);
    jrows(f, "memory", r->memory, r->n_memory);
    jrows(f, "time", r->time, r->n_time);
    fputs("  \"layers\": [", f);
    for (int i = 0; i < r->n_layers; i++) {
        const MeLayerCompare *l = &r->layers[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        me_json_string(f, l->name);
        fputs(", \"op\": ", f);
        me_json_string(f, l->op);
        fprintf(f, ", \"phase\": \"%s\", \"predicted_live_bytes\": ", phase_name(l->phase));
        jnum(f, ME_UNIT_BYTES, l->has_live, l->pred_live);
        fputs(", \"measured_live_bytes\": ", f);
        jnum(f, ME_UNIT_BYTES, l->has_live, l->meas_live);
        fputs(", \"live_error_pct\": ", f);
        jerr(f, l->has_live, l->pred_live, l->has_live, l->meas_live);
        fputs(", \"predicted_s\": ", f);
        jnum(f, ME_UNIT_SECONDS, l->has_time, l->pred_s);
        fputs(", \"measured_s\": ", f);
        jnum(f, ME_UNIT_SECONDS, l->has_time, l->meas_s);
        fputs(", \"time_error_pct\": ", f);
        jerr(f, l->has_time, l->pred_s, l->has_time, l->meas_s);
        fputc('}', f);
    }
    fprintf(f, "%s]\n}\n", r->n_layers ? "\n  " : "");
}

int me_measure_report_write(FILE *f, const MeMeasureReport *r, MeReportFormat format)
{
    if (format == ME_REPORT_JSON) json(f, r);
    else table(f, r);
    return ferror(f) ? MEMEST_ERR_IO : 0;
}
