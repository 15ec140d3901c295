/* memest: the command-line tool. Parses options, calls the library, prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "memest/memest.h"
#include "options.h"

enum { EXIT_OK = 0, EXIT_CHECK = 1, EXIT_BAD = 2, EXIT_UNSUPPORTED = 3 };

/* --help, from the option table: a column of names and placeholders, then
 * the text, its continuation lines under it. */
static void usage(FILE *f)
{
    fprintf(f, "usage: " MEMEST_SYNOPSIS "\n\n");
    for (int o = 0; o < OPT_COUNT; o++) {
        const MeCliOption *op = &me_cli_options[o];
        char col[64];
        snprintf(col, sizeof(col), "%s%s%s", op->name, op->arg ? " " : "", op->arg ? op->arg : "");
        fprintf(f, "  %-30s", col);
        for (const char *h = op->help; *h; h++) {
            fputc(*h, f);
            if (*h == '\n') fprintf(f, "%32s", "");
        }
        fputc('\n', f);
    }
    fprintf(f, "\nexit status: " MEMEST_EXIT_STATUS "\n");
}

/* --list-gpus: the built-in table, then those of any --gpu-file. */
static void list_gpus(const MemestGpu *user, int n_user)
{
    int n;
    const MemestGpu *t = memest_gpu_table(&n);
    printf("%-12s %10s %10s %10s %12s %5s\n", "gpu", "memory", "GB/s", "FP32 TF/s", "FP16/BF16 TF/s", "SMs");
    for (int i = 0; i < n + n_user; i++) {
        const MemestGpu *g = i < n ? &t[i] : &user[i - n];
        printf("%-12s %6.2f GiB %10.0f %10.1f %12.1f %5d\n", g->name, (double)g->memory / (1u << 30), g->bandwidth / 1e9,
               g->fp32_flops / 1e12, g->fp16_flops / 1e12, g->sms);
    }
}

/* A terminal sees progress; a pipe or a file stays clean. */
static void progress(void *opaque, int64_t batch, uint64_t need)
{
    (void)opaque;
    if (isatty(2)) fprintf(stderr, "\rmemest: batch %lld needs %.2f MiB   ", (long long)batch, (double)need / (1 << 20));
}

static int parse_size(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > (1LL << 40)) return -1;
    *out = v;
    return 0;
}

/* What the command line asked for: the library's settings as the options
 * fill them, and the rest the CLI does itself. */
typedef struct Cli {
    const char *model;
    uint64_t given;             /* OPT_BIT of each option given */
    const char *val[OPT_COUNT]; /* its value (the first, for MANY options) */
    const char **inputs, **dims, **freeze;
    int n_freeze;
    MemestLoadSettings ls;
    MemestAnalyzeSettings as;
    MemestMemorySettings ms;
    MemestConcurrencySettings cs;
    MemestMemorySettings plan_ms; /* --plan: the training settings with --gpus the job's GPUs */
    int plan_gpus;
    MemestGpu *user_gpus; /* --gpu-file */
    int n_user_gpus;
    MemestGpu named, custom, profiled;
    const MemestGpu *gpu;
    const char *plot, *netron, *check, *update, *outfile;
    double tolerance;
    int format;
    int micro_batches;          /* --micro-batches */
} Cli;

static void name_option(char *buf, size_t len, const Cli *c, int o)
{
    const MeCliOption *op = &me_cli_options[o];
    if (op->arg) snprintf(buf, len, "%s '%s'", op->name, c->val[o]);
    else snprintf(buf, len, "%s", op->name);
}

/* One option's value into the settings: the value is checked here, the
 * options it needs or conflicts with later (check_rules), once all are
 * known. Returns -1 after saying why. */
static int apply(Cli *c, int o, const char *val)
{
    const char *a = me_cli_options[o].name;
    switch ((MeCliOpt)o) { /* every option, no default: -Wswitch names one left out */
    case OPT_INPUT: c->inputs[c->ls.n_inputs++] = val; break;
    case OPT_DIM: c->dims[c->ls.n_dims++] = val; break;
    case OPT_SEQ:
    case OPT_NEW_TOKENS: {
        int64_t x;
        if (parse_size(val, &x) < 0) {
            fprintf(stderr, "memest: %s '%s': expected a whole number of tokens from 1 to 2^40\n", a, val);
            return -1;
        }
        if (o == OPT_SEQ) c->ls.seq = x;
        else c->ls.new_tokens = x;
        break;
    }
    case OPT_KV_CACHE:
        if (!strcmp(val, "dynamic")) c->ls.kv_cache = MEMEST_KV_DYNAMIC;
        else if (!strcmp(val, "static")) c->ls.kv_cache = MEMEST_KV_STATIC;
        else if (!strcmp(val, "paged")) c->ls.kv_cache = MEMEST_KV_PAGED;
        else {
            fprintf(stderr, "memest: --kv-cache '%s': expected dynamic, static or paged\n", val);
            return -1;
        }
        break;
    case OPT_WEIGHTS: c->ls.weights = val; break; /* checked by the library, which names the model */
    case OPT_KV_DTYPE: c->ls.kv_dtype = val; break;
    case OPT_ATTN: {
        static const char *const kinds[] = { "eager", "sdpa", "flash", NULL };
        int k = 0;
        while (kinds[k] && strcmp(kinds[k], val)) k++;
        if (!kinds[k]) {
            fprintf(stderr, "memest: --attn '%s': expected eager, sdpa or flash\n", val);
            return -1;
        }
        c->ls.attn = (MemestAttn)(MEMEST_ATTN_EAGER + k);
        break;
    }
    case OPT_FREEZE: c->freeze[c->n_freeze++] = val; break;
    case OPT_BATCH:
        if (parse_size(val, &c->ls.batch) < 0) {
            fprintf(stderr, "memest: --batch '%s': expected a whole number from 1 to 2^40\n", val);
            return -1;
        }
        break;
    case OPT_CONVENTION: {
        int k = memest_convention_from_name(val);
        if (k < 0) {
            fprintf(stderr, "memest: --convention '%s': expected default, torchstat, fvcore, ptflops, thop or deepspeed\n", val);
            return -1;
        }
        c->as.convention = (MemestConvention)k;
        break;
    }
    case OPT_FORMAT:
        if ((c->format = memest_format_from_name(val)) < 0) {
            fprintf(stderr, "memest: --format '%s': expected table, json, csv or markdown\n", val);
            return -1;
        }
        break;
    case OPT_STRICT: c->as.strict = 1; break;
    case OPT_TRAIN:
        c->ms.mode = MEMEST_RUN_TRAIN;
        c->ls.train = 1; /* a language model's training forward */
        break;
    case OPT_LORA: c->ls.lora = val; break;
    case OPT_GRAD: c->ms.mode = MEMEST_RUN_INFER_GRAD; break;
    case OPT_LOSS: {
        int k = memest_loss_from_name(val);
        if (k < 0) {
            fprintf(stderr, "memest: %s '%s': not one of", a, val);
            for (int j = 0; j < MEMEST_LOSS_COUNT; j++) fprintf(stderr, " %s", memest_loss_name((MemestLoss)j));
            fprintf(stderr, "\n");
            return -1;
        }
        c->ms.loss = (MemestLoss)k;
        break;
    }
    case OPT_OPTIMIZER: {
        int k = memest_optimizer_from_name(val);
        if (k < 0) {
            fprintf(stderr, "memest: %s '%s': not one of", a, val);
            for (int j = 0; j < MEMEST_OPT_COUNT; j++) fprintf(stderr, " %s", memest_optimizer_name((MemestOptimizer)j));
            fprintf(stderr, "\n");
            return -1;
        }
        c->ms.optimizer = (MemestOptimizer)k;
        break;
    }
    case OPT_OPTIMIZER_IMPL: {
        int k = memest_optimizer_impl_from_name(val);
        if (k < 0) {
            fprintf(stderr, "memest: %s '%s': not one of single foreach fused default\n", a, val);
            return -1;
        }
        c->ms.optimizer_impl = (MemestOptimizerImpl)k;
        break;
    }
    case OPT_TORCH: {
        int k = memest_torch_from_name(val);
        if (k < 0) {
            fprintf(stderr, "memest: %s '%s': not one of 1.13 2 (the versions whose differences memest models)\n", a, val);
            return -1;
        }
        c->ms.torch = k;
        break;
    }
    case OPT_RUNTIME: {
        static const char *const rts[] = { "cuda", "cpu", NULL };
        const char *const *names = rts;
        int k = 0;
        while (names[k] && strcmp(names[k], val)) k++;
        if (!names[k]) {
            fprintf(stderr, "memest: %s '%s': not one of", a, val);
            for (int j = 0; names[j]; j++) fprintf(stderr, " %s", names[j]);
            fprintf(stderr, "\n");
            return -1;
        }
        c->ms.runtime = (MemestRuntime)k;
        break;
    }
    case OPT_CHECKPOINT: {
        int64_t segs = 0;
        if (!strcmp(val, "sqrt")) c->ms.checkpoint = -1;
        else if (!strcmp(val, "layers")) c->ms.checkpoint = MEMEST_CHECKPOINT_LAYERS;
        else if (!strcmp(val, "selective")) c->ms.checkpoint = MEMEST_CHECKPOINT_SELECTIVE;
        else if (parse_size(val, &segs) < 0 || segs < 2 || segs > 1000000) {
            fprintf(stderr, "memest: --checkpoint '%s': expected sqrt, layers, selective or a number of segments >= 2\n", val);
            return -1;
        } else c->ms.checkpoint = (int)segs;
        break;
    }
    case OPT_INPUT_GRAD: c->ms.input_grad = 1; break;
    case OPT_AMP:
        if (!strcmp(val, "fp16") || !strcmp(val, "float16")) c->ms.amp = 1;
        else if (!strcmp(val, "bf16") || !strcmp(val, "bfloat16")) c->ms.amp = 2;
        else {
            fprintf(stderr, "memest: --amp '%s': expected fp16 or bf16\n", val);
            return -1;
        }
        break;
    case OPT_DTYPE: c->ls.dtype = val; break;
    case OPT_GPU: break; /* looked up once every --gpu-file is read */
    case OPT_GPU_MEM:
        if (!(c->custom.memory = memest_parse_size(val))) {
            fprintf(stderr, "memest: --gpu-mem '%s': expected a size like 24GiB, 16GB or 81920MiB\n", val);
            return -1;
        }
        break;
    case OPT_GPU_FILE: {
        char e2[512];
        if (memest_gpu_load_file(val, &c->user_gpus, &c->n_user_gpus, e2, sizeof(e2)) < 0) {
            fprintf(stderr, "memest: --gpu-file: %s\n", e2);
            return -1;
        }
        break;
    }
    case OPT_DEVICE_PROFILE: {
        char e2[512];
        MemestDeviceProfile prof;
        if (memest_device_profile_load(val, &prof, e2, sizeof(e2)) < 0) {
            fprintf(stderr, "memest: --device-profile: %s\n", e2);
            return -1;
        }
        /* measured on the device: they replace the table and the estimates */
        c->profiled = prof.gpu;
        c->gpu = &c->profiled;
        c->ms.cuda_context = prof.cuda_context_bytes;
        if (prof.cublas_workspace_bytes) c->ms.cublas_workspace = prof.cublas_workspace_bytes;
        break;
    }
    case OPT_MAX_BATCH: break;
    case OPT_MAX_SEQ: break;
    case OPT_MAX_CONCURRENCY:
    case OPT_MAX_NUM_BATCHED_TOKENS: {
        int64_t x;
        if (parse_size(val, &x) < 0) {
            fprintf(stderr, "memest: %s '%s': expected a whole number of tokens from 1 to 2^40\n", a, val);
            return -1;
        }
        if (o == OPT_MAX_CONCURRENCY) c->cs.len = x;
        else c->cs.max_num_batched_tokens = x;
        break;
    }
    case OPT_GPU_MEMORY_UTILIZATION: {
        char *e;
        c->cs.gpu_memory_utilization = strtod(val, &e);
        if (*e || !(c->cs.gpu_memory_utilization > 0 && c->cs.gpu_memory_utilization <= 1)) {
            fprintf(stderr, "memest: %s '%s': expected a fraction above 0, at most 1\n", a, val);
            return -1;
        }
        break;
    }
    case OPT_CPU_THREADS: {
        int64_t t;
        if (parse_size(val, &t) < 0 || t < 1 || t > 4096) {
            fprintf(stderr, "memest: --cpu-threads '%s': expected a number of threads (1 to 4096)\n", val);
            return -1;
        }
        c->ms.cpu_threads = (int)t;
        break;
    }
    case OPT_CPU_ISA:
        if (!strcmp(val, "avx512")) c->ms.cpu_isa = MEMEST_CPU_ISA_AVX512;
        else if (!strcmp(val, "avx2")) c->ms.cpu_isa = MEMEST_CPU_ISA_AVX2;
        else {
            fprintf(stderr, "memest: --cpu-isa '%s': expected avx512 or avx2\n", val);
            return -1;
        }
        break;
    case OPT_GPUS: {
        int64_t g;
        if (parse_size(val, &g) < 0 || g > 65536) {
            fprintf(stderr, "memest: --gpus '%s': expected a number of GPUs\n", val);
            return -1;
        }
        c->ms.gpus = (int)g;
        break;
    }
    case OPT_SHARD: {
        static const char *const sh[] = { "ddp", "zero1", "zero2", "zero3", NULL };
        int k = 0;
        while (sh[k] && strcmp(sh[k], val)) k++;
        if (!strcmp(val, "fsdp")) k = MEMEST_SHARD_ZERO3;
        else if (!sh[k]) {
            fprintf(stderr, "memest: --shard '%s': expected ddp, zero1, zero2, zero3 or fsdp\n", val);
            return -1;
        }
        c->ms.shard = k;
        break;
    }
    case OPT_TP: {
        int64_t t;
        if (parse_size(val, &t) < 0 || t > 4096) {
            fprintf(stderr, "memest: --tp '%s': expected a number of GPUs from 1 to 4096\n", val);
            return -1;
        }
        c->ls.tp = (int)t;
        break;
    }
    case OPT_SP: c->ls.sp = 1; break;
    case OPT_PLAN: break; /* run after the report's analysis */
    case OPT_EP:
    case OPT_PP:
    case OPT_MICRO_BATCHES: {
        int64_t n;
        if (parse_size(val, &n) < 0 || n > (o == OPT_PP ? MEMEST_PP_MAX : 1 << 20)) {
            fprintf(stderr, "memest: %s '%s': expected a number from 1 to %d\n", a, val, o == OPT_PP ? MEMEST_PP_MAX : 1 << 20);
            return -1;
        }
        if (o == OPT_EP) c->ls.ep = (int)n;
        else if (o == OPT_PP) c->ls.pp_stages = (int)n;
        else c->micro_batches = (int)n;
        break;
    }
    case OPT_OFFLOAD:
        if (strcmp(val, "optimizer") && strcmp(val, "params")) {
            fprintf(stderr, "memest: --offload '%s': expected optimizer or params\n", val);
            return -1;
        }
        c->ms.offload = !strcmp(val, "params") ? MEMEST_OFFLOAD_PARAMS : MEMEST_OFFLOAD_OPTIMIZER;
        break;
    case OPT_PLOT: c->plot = val; break;
    case OPT_NETRON: c->netron = val; break;
    case OPT_CHECK: c->check = val; break;
    case OPT_TOLERANCE: {
        char *e;
        c->tolerance = strtod(val, &e);
        if (*e || !(c->tolerance >= 0) || c->tolerance > 1e6) {
            fprintf(stderr, "memest: --tolerance '%s': expected a percentage\n", val);
            return -1;
        }
        break;
    }
    case OPT_UPDATE_GOLDEN: c->update = val; break;
    case OPT_OUTPUT: c->outfile = val; break;
    case OPT_LIST_GPUS: break; /* once every --gpu-file is read */
    case OPT_VERSION: /* acted on as they come */
    case OPT_HELP:
    case OPT_COUNT: break;
    }
    return 0;
}

/* The table's rule for options together: one that needs another that is
 * absent, or conflicts with one given, is an error naming both. */
static int check_rules(const Cli *c)
{
    char x[400], y[400];
    for (int o = 0; o < OPT_COUNT; o++) {
        uint64_t needs = me_cli_options[o].needs;
        if (!(c->given & OPT_BIT_OF(o)) || !needs || (c->given & needs)) continue;
        name_option(x, sizeof(x), c, o);
        fprintf(stderr, "memest: %s needs ", x);
        int left = 0;
        for (int k = 0; k < OPT_COUNT; k++) left += (needs & OPT_BIT_OF(k)) != 0;
        for (int k = 0; k < OPT_COUNT; k++)
            if (needs & OPT_BIT_OF(k)) {
                left--;
                fprintf(stderr, "%s%s", me_cli_options[k].name, !left ? "" : left == 1 ? " or " : ", ");
            }
        fprintf(stderr, ": alone it would bind nothing\n");
        return -1;
    }
    for (size_t k = 0; k < sizeof(me_cli_conflicts) / sizeof(me_cli_conflicts[0]); k++) {
        const MeCliConflict *cf = &me_cli_conflicts[k];
        if (!(c->given & OPT_BIT_OF(cf->a)) || !(c->given & OPT_BIT_OF(cf->b))) continue;
        name_option(x, sizeof(x), c, cf->a);
        name_option(y, sizeof(y), c, cf->b);
        fprintf(stderr, "memest: %s and %s cannot be given together (%s): give one\n", x, y, cf->why);
        return -1;
    }
    return 0;
}

/* --torch binds something only where the versions differ for this model
 * and run, which needs the analysed graph (what its ops save). */
static int check_torch(const Cli *c, const MemestAnalysis *an)
{
    const MemestMemorySettings *ms = &c->ms;
    if (!(c->given & OPT_BIT(TORCH)) || memest_torch_changes(an, ms)) return 0;
    char run[160];
    if (ms->mode == MEMEST_RUN_TRAIN)
        snprintf(run, sizeof(run), "--train with --optimizer %s, --optimizer-impl %s and --runtime %s",
                 memest_optimizer_name(ms->optimizer), memest_optimizer_impl_name(ms->optimizer_impl),
                 ms->runtime == MEMEST_RUNTIME_CPU ? "cpu" : "cuda");
    else
        snprintf(run, sizeof(run), "%s", ms->mode == MEMEST_RUN_INFER_GRAD ? "--grad" : "inference under no_grad");
    fprintf(stderr, "memest: --torch %s binds nothing for %s: the versions differ in nn.MultiheadAttention's attention "
                    "(this model has none whose weights go unread), in what an op saves with autograd on (a mean over "
                    "dims: %s) and in a training step's update (the optimizer's default path on CUDA, its foreach lists "
                    "and fused kernels: %s)\n",
            c->val[OPT_TORCH], run, ms->mode == MEMEST_RUN_INFER ? "autograd is off" : "this model has none",
            ms->mode == MEMEST_RUN_TRAIN ? "this update takes none of them" : "this run does not train");
    return -1;
}

/* The same rule where a value decides whether an option binds anything. */
static int check_values(const Cli *c)
{
    const MemestMemorySettings *ms = &c->ms;
    if ((c->given & OPT_BIT(SHARD)) && ms->gpus < 2) {
        fprintf(stderr, "memest: --shard %s with --gpus '%s' shards nothing: give --gpus 2 or more\n", c->val[OPT_SHARD], c->val[OPT_GPUS]);
        return -1;
    }
    /* what only a CPU run reads */
    static const struct { int opt; const char *why; } cpu_only[] = {
        { OPT_CPU_THREADS, "CPU threads size oneDNN's scratch" },
        { OPT_CPU_ISA, "the ISA sets oneDNN's CPU layouts" },
    };
    for (size_t k = 0; k < sizeof(cpu_only) / sizeof(cpu_only[0]) && ms->runtime != MEMEST_RUNTIME_CPU; k++)
        if (c->given & OPT_BIT_OF(cpu_only[k].opt)) {
            fprintf(stderr, "memest: %s %s with --runtime %s binds nothing: %s; give --runtime cpu\n", me_cli_options[cpu_only[k].opt].name,
                    c->val[cpu_only[k].opt], c->val[OPT_RUNTIME], cpu_only[k].why);
            return -1;
        }
    if ((c->given & OPT_BIT(MICRO_BATCHES)) && c->ls.pp_stages < 2 && !(c->given & OPT_BIT(PLAN))) {
        fprintf(stderr, "memest: --micro-batches %s with --pp %s: one stage holds one micro-batch at a time; give --pp 2 or more\n",
                c->val[OPT_MICRO_BATCHES], c->val[OPT_PP]);
        return -1;
    }
    if (ms->gpus > 1 && ms->mode != MEMEST_RUN_TRAIN && ms->shard < MEMEST_SHARD_ZERO3) {
        /* inference has no gradients or optimizer state to shard, only
         * ZeRO-3's weights */
        fprintf(stderr, "memest: --gpus '%s' with --shard %s needs --train: inference keeps a whole model per GPU "
                        "(only --shard zero3 shards its weights)\n",
                c->val[OPT_GPUS], c->val[OPT_SHARD] ? c->val[OPT_SHARD] : "ddp (the default)");
        return -1;
    }
    return 0;
}

/* --pp: every stage simulated (memest_pipeline); then the report is the
 * worst stage's, whose load and memory settings c is left with. */
static int run_pipeline(Cli *c, MemestPipeline **pp, char *err, size_t errlen)
{
    if (!(*pp = malloc(sizeof(**pp)))) return -1;
    if (memest_pipeline(c->model, &c->ls, &c->ms, c->micro_batches, c->gpu, *pp, err, errlen) < 0) {
        fprintf(stderr, "memest: --pp %d: %s\n", c->ls.pp_stages, err);
        return -1;
    }
    c->ls.pp_stage = (*pp)->worst;
    if ((*pp)->worst < c->ls.pp_stages - 1) c->ms.loss = MEMEST_LOSS_NONE; /* its backward starts from the next stage's gradient */
    return 0;
}

static int find_option(const char *a)
{
    if (!strcmp(a, "-h")) return OPT_HELP;
    for (int o = 0; o < OPT_COUNT; o++)
        if (!strcmp(a, me_cli_options[o].name)) return o;
    return -1;
}

int main(int argc, char **argv)
{
    Cli c = { .tolerance = 1.0, .format = MEMEST_FORMAT_TABLE, .custom = { .name = "custom" } };
    c.inputs = calloc((size_t)argc, sizeof(char *));
    c.dims = calloc((size_t)argc, sizeof(char *));
    c.freeze = calloc((size_t)argc, sizeof(char *));
    memest_load_default_settings(&c.ls);
    memest_analyze_default_settings(&c.as);
    memest_memory_default_settings(&c.ms);
    c.ls.threads = 1; /* a big graph loads and simulates faster with a helper thread */
    int rc = EXIT_BAD, max_batch = 0;
    MemestModel *m = NULL;
    MemestAnalysis *an = NULL;
    MemestPipeline *pp = NULL; /* --pp */
    FILE *out = stdout;
    if (!c.inputs || !c.dims || !c.freeze) goto end;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (c.model) {
                fprintf(stderr, "memest: more than one model given ('%s' and '%s')\n", c.model, a);
                goto end;
            }
            c.model = a;
            continue;
        }
        int o = find_option(a);
        if (o < 0) {
            fprintf(stderr, "memest: unknown option '%s' (memest --help lists them)\n", a);
            goto end;
        }
        const MeCliOption *op = &me_cli_options[o];
        const char *val = NULL;
        if (op->arg) {
            if (i + 1 >= argc) {
                fprintf(stderr, "memest: %s needs a value (%s)\n", a, op->arg);
                goto end;
            }
            val = argv[++i];
        }
        if (o == OPT_HELP) {
            usage(stdout);
            rc = EXIT_OK;
            goto end;
        } else if (o == OPT_VERSION) {
            printf("memest %s\n", memest_version());
            rc = EXIT_OK;
            goto end;
        }
        if ((c.given & OPT_BIT_OF(o)) && !op->many) {
            /* the same again changes nothing; another value is a conflict */
            if (!val || !strcmp(val, c.val[o])) continue;
            fprintf(stderr, "memest: %s given twice ('%s' and '%s'): give one\n", a, c.val[o], val);
            goto end;
        }
        if (!(c.given & OPT_BIT_OF(o))) c.val[o] = val;
        c.given |= OPT_BIT_OF(o);
        if (apply(&c, o, val) < 0) goto end;
    }
    if (c.given & OPT_BIT(LIST_GPUS)) {
        list_gpus(c.user_gpus, c.n_user_gpus);
        rc = EXIT_OK;
        goto end;
    }
    if (!c.model) {
        usage(stderr);
        goto end;
    }
    if (check_rules(&c) < 0 || check_values(&c) < 0) goto end;
    max_batch = (c.given & OPT_BIT(MAX_BATCH)) != 0;
    if (c.given & OPT_BIT(GPU)) {
        if (memest_gpu_find(c.val[OPT_GPU], c.user_gpus, c.n_user_gpus, &c.named) < 0) {
            fprintf(stderr, "memest: --gpu '%s': not a known GPU (memest --list-gpus; --gpu-mem SIZE for others)\n", c.val[OPT_GPU]);
            goto end;
        }
        c.gpu = &c.named;
    }
    c.ls.inputs = c.inputs;
    c.ls.dims = c.dims;
    char err[1024];
    if (c.custom.memory) {
        /* --gpu-mem: a card of that size, with the named GPU's speeds if any */
        if (c.gpu) {
            uint64_t mem = c.custom.memory;
            c.custom = *c.gpu;
            c.custom.memory = mem;
        }
        c.gpu = &c.custom;
    }
    const MemestGpu *gpu = c.gpu;
    MemestMemorySettings *ms = &c.ms;
    if (gpu) {
        if (!ms->cuda_context) ms->cuda_context = memest_gpu_context(gpu);
        /* cuBLAS takes a 32 MiB workspace on Hopper and later */
        if (!ms->cublas_workspace && (!strncmp(gpu->name, "h100", 4) || !strncmp(gpu->name, "h200", 4) || !strncmp(gpu->name, "b200", 4)))
            ms->cublas_workspace = UINT64_C(32) << 20;
    }
    if (c.given & OPT_BIT(PLAN)) {
        /* --gpus counts the plans' GPUs; the report itself is one GPU's */
        c.plan_ms = *ms;
        c.plan_gpus = ms->gpus;
        ms->gpus = 1;
        ms->shard = MEMEST_SHARD_DDP;
    }
    if (c.ls.pp_stages > 1 && run_pipeline(&c, &pp, err, sizeof(err)) < 0) goto end;
    if (memest_model_load(&m, c.model, &c.ls, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: %s\n", err);
        goto end;
    }
    if (!(c.given & OPT_BIT(TORCH))) /* the torch the file says it runs on (its note says so) */
        ms->torch = c.plan_ms.torch = memest_model_torch(m);
    if (memest_model_runs_on(m, ms->torch, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: --torch %s: %s\n", memest_torch_name(ms->torch), err);
        goto end;
    }
    for (int k = 0; k < c.n_freeze; k++)
        if (memest_freeze(m, c.freeze[k]) == 0) {
            fprintf(stderr, "memest: --freeze '%s': no layer's module name matches\n", c.freeze[k]);
            goto end;
        }
    int r = memest_analyze(m, &c.as, &an, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "memest: %s\n", err);
        rc = r == MEMEST_ERR_UNSUPPORTED ? EXIT_UNSUPPORTED : EXIT_BAD;
        goto end;
    }
    if (check_torch(&c, an) < 0) goto end;
    if (c.outfile && !(out = fopen(c.outfile, "w"))) {
        fprintf(stderr, "memest: -o %s: %s\n", c.outfile, strerror(errno));
        out = stdout;
        goto end;
    }
    if (ms->amp == 1 && ms->runtime == MEMEST_RUNTIME_CPU)
        fprintf(stderr, "memest: note: --amp fp16 --runtime cpu: torch 1.13's CPU autocast runs bfloat16 only "
                        "(torch.autocast(\"cpu\", dtype=torch.float16) raises); CPU autocast's lists are applied in fp16\n");
    ms->record_series = c.plot != NULL;
    if (memest_set_memory(an, ms, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: %s\n", err);
        goto end;
    }
    if (*memest_memory_note(an)) fprintf(stderr, "memest: note: memory timeline: %s\n", memest_memory_note(an));
    const char *note, *code;
    for (int i = 0; (note = memest_note_text(an, i, &code)); i++)
        fprintf(stderr, "memest: note (%s): %s\n", code, note); /* names in notes are escaped by the passes */
    if (gpu) memest_set_device(an, gpu, ms->amp || (c.ls.dtype && strcmp(c.ls.dtype, "float32") && strcmp(c.ls.dtype, "fp32")));
    if (pp) memest_note_pipeline(an, pp);
    if (max_batch) {
        MemestMaxBatch mb;
        if (memest_max_batch(m, ms, gpu->memory, &mb, progress, NULL, err, sizeof(err)) < 0) {
            if (isatty(2)) fprintf(stderr, "\n");
            fprintf(stderr, "memest: --max-batch: %s\n", err);
            goto end;
        }
        if (isatty(2)) fprintf(stderr, "\r%60s\r", "");
        memest_note_max_batch(an, &mb);
    }
    if (c.given & OPT_BIT(MAX_SEQ)) {
        MemestMaxSeq mq;
        if (memest_max_seq(m, ms, gpu->memory, &mq, progress, NULL, err, sizeof(err)) < 0) {
            if (isatty(2)) fprintf(stderr, "\n");
            fprintf(stderr, "memest: --max-seq: %s\n", err);
            goto end;
        }
        if (isatty(2)) fprintf(stderr, "\r%60s\r", "");
        memest_note_max_seq(an, &mq);
    }
    if (c.given & OPT_BIT(PLAN)) {
        MemestPlan plan;
        if (!gpu) {
            fprintf(stderr, "memest: --plan needs --gpu (the GPU's speeds and links)\n");
            goto end;
        }
        if (memest_plan(c.model, &c.ls, &c.plan_ms, gpu, c.plan_gpus, c.micro_batches, &plan, err, sizeof(err)) < 0) {
            fprintf(stderr, "memest: --plan: %s\n", err);
            goto end;
        }
        if (plan.skipped[0]) fprintf(stderr, "memest: --plan: not planned: %s\n", plan.skipped);
        int nr = memest_note_plan(an, &plan);
        memest_plan_free(&plan);
        if (nr < 0) {
            fprintf(stderr, "memest: --plan: out of memory\n");
            goto end;
        }
    }
    if (c.given & OPT_BIT(MAX_CONCURRENCY)) {
        MemestConcurrency cc;
        if (memest_max_concurrency(m, c.model, &c.ls, ms, gpu->memory, &c.cs, &cc, err, sizeof(err)) < 0) {
            fprintf(stderr, "memest: --max-concurrency: %s\n", err);
            goto end;
        }
        memest_note_concurrency(an, &cc);
    }
    if (memest_report(an, (MemestFormat)c.format, out) < 0 || fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "memest: could not write the report\n");
        goto end;
    }
    rc = EXIT_OK;
    const char *plot = c.plot, *netron = c.netron;
    if (plot || netron) {
        const char *p = plot ? plot : netron;
        FILE *pf = fopen(p, "w");
        int pr = pf ? (plot ? memest_plot_svg(an, pf, gpu ? gpu->memory : 0, gpu ? gpu->name : NULL) : memest_netron_metrics(an, pf)) : -1;
        if (pf && fclose(pf) != 0) pr = -1;
        if (pr < 0) {
            fprintf(stderr, "memest: could not write %s\n", p);
            rc = EXIT_BAD;
        }
        if (plot && netron) {
            pf = fopen(netron, "w");
            pr = pf ? memest_netron_metrics(an, pf) : -1;
            if ((pf && fclose(pf) != 0) || pr < 0) {
                fprintf(stderr, "memest: could not write %s\n", netron);
                rc = EXIT_BAD;
            }
        }
    }
    if (c.update && memest_write_golden(an, c.update, err, sizeof(err)) < 0) {
        fprintf(stderr, "memest: --update-golden: %s\n", err);
        rc = EXIT_BAD;
    }
    if (c.check && rc == EXIT_OK) {
        int cr = memest_check_golden(an, c.check, c.tolerance, stderr, err, sizeof(err));
        if (cr < 0) {
            fprintf(stderr, "memest: --check: %s\n", err);
            rc = EXIT_BAD;
        } else if (cr > 0) {
            rc = EXIT_CHECK;
        }
    }
end:
    free(pp);
    if (out != stdout) fclose(out);
    memest_analysis_free(&an);
    memest_model_free(&m);
    memest_free(c.user_gpus);
    free(c.inputs);
    free(c.dims);
    free(c.freeze);
    return rc;
}
