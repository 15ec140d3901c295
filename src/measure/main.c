/* memest-measure: runs a model on a CUDA GPU following memest's own
 * timeline and prints predicted beside measured (README "Validating on a
 * GPU"). Exit status: 0 ok, 1 the measurement failed on the GPU, 2 bad
 * input or usage, 3 an op memest-measure has no kernel for, 77 no GPU
 * (nothing measured). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compose.h"
#include "gpu.h"
#include "plan.h"
#include "profile.h"
#include "report.h"

#define EXIT_SKIP 77
#define MAX_SPECS 64

static void usage(FILE *f)
{
    fprintf(f,
            "usage: memest-measure MODEL [--input [NAME=]SHAPE[:DTYPE]]... [--dim NAME=N]... [--batch N]\n"
            "                      [--train] [--optimizer sgd|momentum|adam|adamw]\n"
            "                      [--format table|json] [-o FILE] [--device-profile FILE]\n"
            "                      [--warmup N] [--iterations N] [--conv cudnn|direct] [--device N]\n"
            "                      [--alloc-log FILE.csv]\n"
            "       memest-measure --calibrate [-o FILE] [--device N]\n"
            "Runs MODEL on a CUDA GPU (random data) following memest's predicted allocation plan and\n"
            "prints memest's predictions beside what was measured. --calibrate measures the GPU and\n"
            "writes a device profile (doc/device-profile.md) that memest --device-profile reads.\n"
            "Exit status: 0 ok, 1 measurement failed, 2 bad input or usage, 3 unsupported op,\n"
            "77 no CUDA GPU (nothing measured).\n");
}

typedef struct Args {
    const char *model, *out, *profile, *alloc_log;
    const char *inputs[MAX_SPECS], *dims[MAX_SPECS];
    int n_inputs, n_dims;
    int64_t batch;
    bool train, calibrate, direct_conv;
    MemestOptimizer optimizer;
    MeReportFormat format;
    int warmup, iterations, device;
} Args;

static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, Args *a)
{
    memset(a, 0, sizeof(*a));
    a->batch = 0; /* not given: the model's own or 1, as memest binds it */
    a->warmup = 3;
    a->iterations = 10;
    a->optimizer = MEMEST_OPT_SGD;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool has_val = i + 1 < argc;
        long long v;
#define NEED()                                                              \
    do {                                                                    \
        if (!has_val) {                                                     \
            fprintf(stderr, "memest-measure: %s needs a value\n", o);       \
            return -1;                                                      \
        }                                                                   \
    } while (0)
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(o, "--input")) {
            NEED();
            if (a->n_inputs >= MAX_SPECS) { fprintf(stderr, "memest-measure: too many --input\n"); return -1; }
            a->inputs[a->n_inputs++] = argv[++i];
        } else if (!strcmp(o, "--dim")) {
            NEED();
            if (a->n_dims >= MAX_SPECS) { fprintf(stderr, "memest-measure: too many --dim\n"); return -1; }
            a->dims[a->n_dims++] = argv[++i];
        } else if (!strcmp(o, "--batch")) {
            NEED();
            if (parse_int(argv[++i], 1, INT64_C(1) << 31, &v) < 0) {
                fprintf(stderr, "memest-measure: --batch: '%s' is not a positive integer\n", argv[i]);
                return -1;
            }
            a->batch = v;
        } else if (!strcmp(o, "--train")) {
            a->train = true;
        } else if (!strcmp(o, "--optimizer")) {
            NEED();
            const char *s = argv[++i];
            if (!strcmp(s, "sgd")) a->optimizer = MEMEST_OPT_SGD;
            else if (!strcmp(s, "momentum")) a->optimizer = MEMEST_OPT_MOMENTUM;
            else if (!strcmp(s, "adam")) a->optimizer = MEMEST_OPT_ADAM;
            else if (!strcmp(s, "adamw")) a->optimizer = MEMEST_OPT_ADAMW;
            else {
                fprintf(stderr, "memest-measure: --optimizer: '%s' is not one of sgd, momentum, adam, adamw\n", s);
                return -1;
            }
        } else if (!strcmp(o, "--format")) {
            NEED();
            const char *s = argv[++i];
            if (!strcmp(s, "table")) a->format = ME_REPORT_TABLE;
            else if (!strcmp(s, "json")) a->format = ME_REPORT_JSON;
            else {
                fprintf(stderr, "memest-measure: --format: '%s' is not table or json\n", s);
                return -1;
            }
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            NEED();
            a->out = argv[++i];
        } else if (!strcmp(o, "--device-profile")) {
            NEED();
            a->profile = argv[++i];
        } else if (!strcmp(o, "--alloc-log")) {
            NEED();
            a->alloc_log = argv[++i];
        } else if (!strcmp(o, "--calibrate")) {
            a->calibrate = true;
        } else if (!strcmp(o, "--warmup") || !strcmp(o, "--iterations") || !strcmp(o, "--device")) {
            NEED();
            if (parse_int(argv[++i], !strcmp(o, "--iterations") ? 1 : 0, 100000, &v) < 0) {
                fprintf(stderr, "memest-measure: %s: '%s' is not a valid count\n", o, argv[i]);
                return -1;
            }
            if (!strcmp(o, "--warmup")) a->warmup = (int)v;
            else if (!strcmp(o, "--iterations")) a->iterations = (int)v;
            else a->device = (int)v;
        } else if (!strcmp(o, "--conv")) {
            NEED();
            const char *s = argv[++i];
            if (!strcmp(s, "cudnn")) a->direct_conv = false;
            else if (!strcmp(s, "direct")) a->direct_conv = true;
            else {
                fprintf(stderr, "memest-measure: --conv: '%s' is not cudnn or direct\n", s);
                return -1;
            }
        } else if (o[0] == '-' && o[1]) {
            fprintf(stderr, "memest-measure: unknown option '%s'\n", o);
            return -1;
        } else if (!a->model) {
            a->model = o;
        } else {
            fprintf(stderr, "memest-measure: more than one model given ('%s', '%s')\n", a->model, o);
            return -1;
        }
#undef NEED
    }
    if (!a->calibrate && !a->model) {
        fprintf(stderr, "memest-measure: no model given\n");
        return -1;
    }
    return 0;
}

static int no_gpu(const char *why)
{
    fprintf(stderr, "memest-measure: no CUDA GPU available (%s); nothing measured\n", why);
    return EXIT_SKIP;
}

static FILE *open_out(const char *path)
{
    if (!path) return stdout;
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "memest-measure: %s: cannot write: %s\n", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *path)
{
    if (f == stdout) return fflush(f) ? -1 : 0;
    int rc = ferror(f) | fclose(f);
    if (rc) fprintf(stderr, "memest-measure: %s: write error\n", path);
    return rc ? -1 : 0;
}

static int calibrate(const Args *a)
{
    MeGpuInfo info;
    char why[512], err[1024];
    if (me_gpu_probe(a->device, &info, why, sizeof(why)) < 0) return no_gpu(why);
    MeDeviceProfile p;
    if (me_gpu_calibrate(a->device, false, &p, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest-measure: calibration failed: %s\n", err);
        return 1;
    }
    FILE *f = open_out(a->out);
    if (!f) return 2;
    me_device_profile_write(f, &p);
    if (close_out(f, a->out) < 0) return 2;
    if (a->out) fprintf(stderr, "memest-measure: device profile of %s written to %s\n", p.gpu.name, a->out);
    return 0;
}

static const char *opt_name(MemestOptimizer o)
{
    switch (o) {
    case MEMEST_OPT_MOMENTUM: return "momentum";
    case MEMEST_OPT_ADAM: return "adam";
    case MEMEST_OPT_ADAMW: return "adamw";
    default: return "sgd";
    }
}

int main(int argc, char **argv)
{
    Args a;
    if (parse_args(argc, argv, &a) < 0) {
        usage(stderr);
        return 2;
    }
    if (a.calibrate) return calibrate(&a);

    char err[2048], why[512];
    /* host side first: a model memest-measure cannot run is reported with
     * or without a GPU */
    MemestLoadSettings ls = { .inputs = a.inputs, .n_inputs = a.n_inputs, .dims = a.dims, .n_dims = a.n_dims, .batch = a.batch };
    MemestModel *m = NULL;
    if (memest_model_load(&m, a.model, &ls, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest-measure: %s\n", err);
        return 2;
    }
    /* the batch as bound (a fixed batch, or --dim, may have set it) */
    const MeValue *in0 = m->g.n_inputs ? &m->g.v[m->g.inputs[0]] : NULL;
    if (in0 && in0->known && in0->shape.rank > 0) a.batch = in0->shape.d[0];
    else if (!a.batch) a.batch = 1;
    int status = 0;
    MePlan plans[2];
    MePlan *pp[2] = { &plans[0], &plans[1] };
    int n_plans = 0;
    MeMeasureResult res;
    memset(&res, 0, sizeof(res));
    MeComposed comp;
    memset(&comp, 0, sizeof(comp));
    MemestAnalyzeSettings as = { .convention = MEMEST_CONVENTION_DEFAULT };
    MemestAnalysis *an = NULL;
    if (memest_analyze(m, &as, &an, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest-measure: %s\n", err);
        status = 2;
        goto end;
    }
    MemestRunMode mode = a.train ? MEMEST_RUN_TRAIN : MEMEST_RUN_INFER;

    /* the GPU: its figures decide memest's cuBLAS workspace and context */
    MeGpuInfo info;
    bool have_gpu = me_gpu_probe(a.device, &info, why, sizeof(why)) >= 0;
    MeDeviceProfile prof;
    memset(&prof, 0, sizeof(prof));
    bool have_prof = false;
    char prof_label[512] = "";
    if (a.profile) {
        if (me_device_profile_read(a.profile, &prof, err, sizeof(err)) < 0) {
            fprintf(stderr, "memest-measure: %s\n", err);
            status = 2;
            goto end;
        }
        have_prof = true;
        snprintf(prof_label, sizeof(prof_label), "%s (from %s)", prof.gpu.name, a.profile);
    }
    uint64_t workspace = have_prof ? prof.cublas_workspace_bytes
                       : have_gpu && info.cc_major >= 9 ? UINT64_C(32) << 20 /* PyTorch on Hopper and later */
                       : 0;
    MePlanSettings ps = { .mode = mode, .optimizer = a.optimizer, .step = 1, .cublas_workspace = workspace };
    n_plans = a.train ? 2 : 1;
    for (int k = 0; k < n_plans; k++) {
        ps.step = k + 1;
        int rc = me_plan_build(&plans[k], m, &ps, err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "memest-measure: %s\n", err);
            n_plans = k;
            status = rc == ME_EUNSUPPORTED ? 3 : 2;
            goto end;
        }
    }
    /* the plan is recorded from memest's own timeline (plan.c) */
    char detail[256];
    int n_events = 0;
    for (int k = 0; k < n_plans; k++)
        for (int i = plans[k].n_base; i < plans[k].n_sim; i++) n_events += plans[k].ev[i].kind != ME_TL_RUN;
    snprintf(detail, sizeof(detail), "%d allocations, frees and points, recorded from memest's simulated timeline", n_events);

    if (!have_gpu) {
        status = no_gpu(why);
        goto end;
    }

    /* memest's predictions for this GPU */
    if (!have_prof) {
        if (me_gpu_calibrate(a.device, true, &prof, err, sizeof(err)) < 0) {
            fprintf(stderr, "memest-measure: quick calibration failed: %s\n", err);
            status = 1;
            goto end;
        }
        snprintf(prof_label, sizeof(prof_label), "%s (quick calibration now; --device-profile for a full one)", prof.gpu.name);
    }
    MemestMemorySettings ms = { .mode = mode, .optimizer = a.optimizer, .runtime = MEMEST_RUNTIME_CUDA, .record_series = 1,
                                .cublas_workspace = workspace, .cuda_context = have_prof ? prof.cuda_context_bytes : 0 };
    if (memest_set_memory(an, &ms, err, sizeof(err)) < 0 || memest_set_device(an, &prof.gpu, 0) < 0) {
        fprintf(stderr, "memest-measure: prediction failed: %s\n", err);
        status = 1;
        goto end;
    }

    MeMeasureOptions mo = { .device = a.device, .warmup = a.warmup, .iterations = a.iterations, .direct_conv = a.direct_conv,
                            .seed = 0x6d656d657374ull, .lr = 1e-3f, .alloc_log = a.alloc_log };
    if (me_gpu_measure(pp, n_plans, &mo, &res, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest-measure: measurement failed: %s\n", err);
        status = 1;
        goto end;
    }
    if (me_measure_compose(an, pp, n_plans, &res, &comp) < 0) {
        fprintf(stderr, "memest-measure: out of memory\n");
        status = 1;
        goto end;
    }
    char device[512], software[256];
    snprintf(device, sizeof(device), "%s (sm_%d%d, %d SMs, %.1f GiB)", info.name, info.cc_major, info.cc_minor, info.sms,
             (double)info.total_memory / (double)(UINT64_C(1) << 30));
    me_gpu_software(&info, software, sizeof(software));
    comp.report.model = a.model;
    comp.report.mode = a.train ? "training" : "inference";
    comp.report.optimizer = a.train ? opt_name(a.optimizer) : NULL;
    comp.report.batch = a.batch;
    comp.report.device = device;
    comp.report.software = software;
    comp.report.profile = prof_label;
    comp.report.plan_matches = true;
    comp.report.plan_detail = detail;
    FILE *f = open_out(a.out);
    if (!f) {
        status = 2;
        goto end;
    }
    me_measure_report_write(f, &comp.report, a.format);
    if (close_out(f, a.out) < 0) status = 2;
end:
    me_composed_free(&comp);
    me_measure_result_free(&res);
    for (int k = 0; k < n_plans; k++) me_plan_free(&plans[k]);
    memest_analysis_free(&an);
    memest_model_free(&m);
    return status;
}
