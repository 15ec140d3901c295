/* Plan replay order: the allocations and frees memest-measure's executor
 * issues for a step (src/measure/plan.c, walked through the same hooks the
 * GPU executor uses, with a host backend standing in for cudaMalloc) are
 * exactly the ones memest's simulation makes (captured from the allocator
 * model it feeds), and replaying them reproduces memest's peaks and its
 * timeline point by point. No GPU needed.
 *
 * usage: test_plan ROOT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "devalloc.h"
#include "plan.h"
#include "simtrace.h"

#include "../check.h"

/* The executor's allocator, on host memory: the same instrumented allocator
 * as on the GPU (devalloc.c), fed by the same walk. */
typedef struct Replay {
    MeDevAlloc *da;
    MeDevBlock **blk;    /* plan buffer → block */
    int n_blk;
    MeAllocator *model;  /* memest's caching-allocator model, fed the same calls */
    uint64_t *note_live; /* live bytes at each timeline point */
    int n_notes, cap_notes;
    int runs;
    int bad_runs;        /* RUN events naming buffers that are not alive */
    const MePlan *p;
} Replay;

static int r_alloc(void *o, const MePlanEvent *e)
{
    Replay *r = o;
    if (me_devalloc_alloc(r->da, e->bytes, e->cat, e->buf, &r->blk[e->buf]) < 0) return -1;
    return me_allocator_malloc(r->model, e->buf, e->bytes);
}

static int r_free(void *o, const MePlanEvent *e)
{
    Replay *r = o;
    me_devalloc_free(r->da, r->blk[e->buf]);
    r->blk[e->buf] = NULL;
    return me_allocator_release(r->model, e->buf);
}

static int r_note(void *o, const MePlanEvent *e, int index)
{
    Replay *r = o;
    (void)e;
    if (me_grow(&r->note_live, &r->cap_notes, index + 1, sizeof(uint64_t)) < 0) return -1;
    r->note_live[index] = me_devalloc_stats(r->da)->live;
    if (index + 1 > r->n_notes) r->n_notes = index + 1;
    return 0;
}

static bool live_buf(const Replay *r, int b) { return b < 0 || (b < r->p->n_buf && r->blk[b]); }

static int r_run(void *o, const MePlanEvent *e)
{
    Replay *r = o;
    r->runs++;
    /* whatever a launch writes or reads must exist at that moment */
    bool ok = live_buf(r, e->buf) && live_buf(r, e->accum) && live_buf(r, e->gout);
    if (e->run == ME_RUN_FORWARD) {
        const MeNode *n = &r->p->g->n[e->node];
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !live_buf(r, r->p->vbuf[n->in[i]])) ok = false;
    }
    if (e->run == ME_RUN_BACKWARD) {
        int need[8];
        int k = me_plan_backward_needs(r->p, e->node, e->input, need, 8);
        for (int i = 0; i < k; i++)
            if (!live_buf(r, r->p->vbuf[need[i]])) ok = false;
        if (r->p->extra[e->node] >= 0 && !live_buf(r, r->p->extra[e->node])) ok = false;
        if (e->gout < 0) ok = false;
    }
    if (e->run == ME_RUN_OPTIMIZER && r->p->opt_state >= 0 && !live_buf(r, r->p->opt_state)) ok = false;
    if (!ok) r->bad_runs++;
    return 0;
}

/* no memory behind the blocks: distinct fake addresses, counted back */
static uintptr_t next_addr = 4096;
static int64_t raw_live;

static int host_raw_alloc(void *o, uint64_t bytes, void **ptr)
{
    (void)o;
    *ptr = (void *)next_addr;
    next_addr += (bytes + 255) & ~(uint64_t)255;
    raw_live++;
    return 0;
}

static void host_raw_free(void *o, void *ptr)
{
    (void)o;
    (void)ptr;
    raw_live--;
}

static const char *mode_name(MemestRunMode m) { return m == MEMEST_RUN_TRAIN ? "train" : "infer"; }

static void check_case(const char *path, int64_t batch, MemestRunMode mode, MemestOptimizer opt, int step)
{
    char err[1024], label[512];
    snprintf(label, sizeof(label), "%.300s batch %lld %s %s step %d", path, (long long)batch, mode_name(mode),
             mode == MEMEST_RUN_TRAIN ? (opt == MEMEST_OPT_SGD ? "sgd" : opt == MEMEST_OPT_MOMENTUM ? "momentum" : "adam") : "-", step);
    MemestLoadSettings ls = { .batch = batch };
    MemestModel *m = NULL;
    if (memest_model_load(&m, path, &ls, err, sizeof(err)) < 0) {
        CHECK(0, "%s: load: %s", label, err);
        return;
    }
    MemestAnalyzeSettings as = { 0 };
    MemestAnalysis *a = NULL;
    CHECK(memest_analyze(m, &as, &a, err, sizeof(err)) >= 0, "%s: analyze: %s", label, err);
    MemestMemorySettings ms = { .mode = mode, .optimizer = opt, .runtime = MEMEST_RUNTIME_CUDA, .step = step,
                                .record_series = 1 };
    MePlanSettings ps = { .mode = mode, .optimizer = opt, .step = step };
    MePlan p;
    int rc = me_plan_build(&p, m, &ps, err, sizeof(err));
    CHECK(rc >= 0, "%s: plan: %s", label, err);
    if (rc < 0) {
        memest_analysis_free(&a);
        memest_model_free(&m);
        return;
    }
    /* 1. the same allocations and frees as memest's simulation */
    MeSimTrace t = { 0 };
    MemestMemory mem;
    rc = me_simtrace_capture(m, &ms, &t, &mem, err, sizeof(err));
    CHECK(rc >= 0, "%s: capture: %s", label, err);
    if (rc >= 0) {
        char msg[1024];
        int d = me_simtrace_compare(&p, &t, msg, sizeof(msg));
        CHECK(d < 0, "%s: plan and memest differ: %s", label, msg);
    }
    /* 2. walked through the executor's allocator: memest's peaks */
    Replay r = { .p = &p };
    MeDevAllocBackend be = { .raw_alloc = host_raw_alloc, .raw_free = host_raw_free };
    r.blk = calloc((size_t)p.n_buf + 1, sizeof(MeDevBlock *));
    CHECK(me_devalloc_new(&r.da, &be) >= 0 && r.blk && me_allocator_new(&r.model) >= 0, "%s: allocators", label);
    MePlanHooks h = { .opaque = &r, .alloc = r_alloc, .release = r_free, .note = r_note, .run = r_run };
    CHECK(me_plan_walk(&p, 0, p.n_sim, &h) >= 0, "%s: walk failed", label);
    const MeDevAllocStats *st = me_devalloc_stats(r.da);
    const MeAllocStats *as2 = me_allocator_stats(r.model);
    CHECK(st->peak_live == mem.peak, "%s: replayed peak %llu B, memest's peak %llu B", label, (unsigned long long)st->peak_live,
          (unsigned long long)mem.peak);
    CHECK(as2->peak_allocated == mem.peak_allocated, "%s: replayed peak_allocated %llu, memest %llu", label,
          (unsigned long long)as2->peak_allocated, (unsigned long long)mem.peak_allocated);
    CHECK(as2->peak_reserved == mem.peak_reserved, "%s: replayed peak_reserved %llu, memest %llu", label,
          (unsigned long long)as2->peak_reserved, (unsigned long long)mem.peak_reserved);
    CHECK(st->live == mem.end, "%s: alive after the step %llu, memest %llu", label, (unsigned long long)st->live,
          (unsigned long long)mem.end);
    CHECK(r.bad_runs == 0, "%s: %d launches touch buffers that are not allocated", label, r.bad_runs);
    CHECK(r.runs > 0, "%s: no launches", label);
    /* 3. the timeline, point by point (memest_set_memory's series) */
    if (a && memest_set_memory(a, &ms, err, sizeof(err)) >= 0) {
        const MemestSeriesPoint *pts;
        int np;
        if (memest_memory_series(a, step - 1, &pts, &np) >= 0) {
            CHECK(np == r.n_notes && np == p.n_notes, "%s: %d timeline points in memest, %d in the plan", label, np, r.n_notes);
            int bad = -1;
            for (int i = 0; i < np && i < r.n_notes; i++) {
                uint64_t live = 0;
                for (int c = 0; c < MEMEST_MEM_COUNT; c++) live += pts[i].live[c];
                if (live != r.note_live[i] && bad < 0) bad = i;
            }
            CHECK(bad < 0, "%s: live bytes differ at timeline point %d", label, bad);
        } else {
            CHECK(0, "%s: no series", label);
        }
    }
    /* 4. the walk back to the baseline frees everything but carried state */
    CHECK(me_plan_walk(&p, p.n_sim, p.n_ev, &h) >= 0, "%s: epilogue walk", label);
    uint64_t carried = 0;
    for (int i = 0; i < p.n_buf; i++)
        if (p.buf[i].carried && r.blk[i]) carried += p.buf[i].bytes;
    CHECK(me_devalloc_stats(r.da)->live == carried, "%s: %llu B alive after the epilogue, carried state is %llu B", label,
          (unsigned long long)me_devalloc_stats(r.da)->live, (unsigned long long)carried);
    for (int i = 0; i < p.n_buf; i++)
        if (r.blk[i]) me_devalloc_free(r.da, r.blk[i]);
    me_devalloc_destroy(r.da);
    CHECK(raw_live == 0, "%s: %lld raw allocations never freed", label, (long long)raw_live);
    me_allocator_free(r.model);
    free(r.blk);
    me_free(r.note_live);
    me_simtrace_free(&t);
    me_plan_free(&p);
    memest_analysis_free(&a);
    memest_model_free(&m);
}

static void check_unsupported(const char *path, const char *want)
{
    char err[1024];
    MemestLoadSettings ls = { .batch = 1 };
    MemestModel *m = NULL;
    if (memest_model_load(&m, path, &ls, err, sizeof(err)) < 0) {
        CHECK(0, "%s: load: %s", path, err);
        return;
    }
    MePlan p;
    MePlanSettings ps = { .mode = MEMEST_RUN_INFER, .step = 1 };
    int rc = me_plan_build(&p, m, &ps, err, sizeof(err));
    CHECK(rc == ME_EUNSUPPORTED && strstr(err, want), "%s: expected an unsupported-op error naming '%s', got %d: %s", path, want, rc, err);
    if (rc >= 0) me_plan_free(&p);
    memest_model_free(&m);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_plan ROOT\n");
        return 2;
    }
    if (!me_simtrace_available()) {
        printf("SKIP: built without the linker's --wrap, memest's allocation sequence cannot be captured\n");
        return 77;
    }
    static const char *const models[] = {
        "models/resnet18.json", "models/resnet50.json", "tests/measure/models/mini.json", "tests/measure/models/matmul.onnx",
        "models/onnx/resnet18_op13_eval.onnx", "models/onnx/resnet18_op17_train.onnx",
        "models/onnx/resnet50_op17_train.onnx", "models/onnx/mobilenet_v2_op13_train.onnx",
        "models/onnx/mobilenet_v2_op17_eval.onnx", "models/onnx/vgg16_op13_train.onnx", "models/onnx/vgg16_op17_eval.onnx",
        "models/onnx/squeezenet1_0_op13_train.onnx", "models/onnx/squeezenet1_0_op17_eval.onnx",
        "models/onnx/zoo/resnet18.onnx", "models/onnx/zoo/mobilenet_v2.onnx", "models/onnx/zoo/vgg16.onnx",
        "models/onnx/zoo/squeezenet1_0.onnx",
    };
    char path[4096];
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", argv[1], models[i]);
        for (int64_t batch = 1; batch <= 2; batch++) {
            check_case(path, batch, MEMEST_RUN_INFER, MEMEST_OPT_SGD, 1);
            check_case(path, batch, MEMEST_RUN_TRAIN, MEMEST_OPT_SGD, 1);
            check_case(path, batch, MEMEST_RUN_TRAIN, MEMEST_OPT_SGD, 2);
        }
        check_case(path, 3, MEMEST_RUN_TRAIN, MEMEST_OPT_MOMENTUM, 1);
        check_case(path, 3, MEMEST_RUN_TRAIN, MEMEST_OPT_MOMENTUM, 2);
        check_case(path, 2, MEMEST_RUN_TRAIN, MEMEST_OPT_ADAM, 1);
        check_case(path, 2, MEMEST_RUN_TRAIN, MEMEST_OPT_ADAM, 2);
    }
    snprintf(path, sizeof(path), "%s/models/onnx/zoo/bert_like.onnx", argv[1]);
    check_unsupported(path, "no GPU kernel");
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
