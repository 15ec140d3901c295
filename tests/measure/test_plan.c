/* The plan memest-measure's executor follows (src/measure/plan.c) is
 * memest's simulated timeline: event for event the allocations, frees,
 * points and runs a trace sink of our own hears from the simulation
 * (src/timeline.h), and walking it through the same hooks the GPU executor
 * uses, with a host backend standing in for cudaMalloc, reproduces memest's
 * peaks and its timeline point by point, every launch finding its buffers
 * alive. No GPU needed.
 *
 * usage: test_plan ROOT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "devalloc.h"
#include "plan.h"
#include "runnable.h"

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

/* The simulation's events, as a sink hears them (binds and category
 * changes are where things live, not what the executor does). */
typedef struct Trace {
    MeTlEvent *ev;
    int n, cap;
} Trace;

static int trace_event(void *o, const MeTlEvent *e)
{
    Trace *t = o;
    if (e->kind == ME_TL_BIND || e->kind == ME_TL_RECAT) return 0;
    if (me_grow(&t->ev, &t->cap, t->n + 1, sizeof(MeTlEvent)) < 0) return ME_ENOMEM;
    t->ev[t->n++] = *e;
    return 0;
}

/* Index of the first plan event in [0, n_sim) that is not the trace's, -1
 * when they are the same sequence. */
static int compare(const MePlan *p, const Trace *t, char *msg, size_t len)
{
    for (int i = 0; i < p->n_sim || i < t->n; i++) {
        if (i >= p->n_sim || i >= t->n) {
            snprintf(msg, len, "event %d: %s has ended, the other goes on (%s)", i, i >= t->n ? "the simulation" : "the plan",
                     me_tl_kind_name(i >= t->n ? p->ev[i].kind : t->ev[i].kind));
            return i;
        }
        const MePlanEvent *e = &p->ev[i];
        const MeTlEvent *s = &t->ev[i];
        bool same = e->kind == s->kind && e->node == s->node && e->phase == s->phase;
        if (same && (e->kind == ME_TL_ALLOC || e->kind == ME_TL_FREE)) same = e->buf == s->storage;
        if (same && e->kind == ME_TL_ALLOC) same = e->bytes == (uint64_t)s->bytes && e->cat == s->cat;
        if (same && e->kind == ME_TL_RUN)
            same = e->run == s->run && e->buf == s->storage && e->accum == s->accum && e->gout == s->gout && e->input == s->input &&
                   e->value == s->value;
        if (!same) {
            snprintf(msg, len, "event %d at node %d: the plan has %s %s of buffer %d, the simulation %s %s of storage %d", i, s->node,
                     me_tl_kind_name(e->kind), e->kind == ME_TL_RUN ? me_tl_run_name(e->run) : "", e->buf, me_tl_kind_name(s->kind),
                     s->kind == ME_TL_RUN ? me_tl_run_name(s->run) : "", s->storage);
            return i;
        }
    }
    return -1;
}

static int r_run(void *o, const MePlanEvent *e)
{
    Replay *r = o;
    r->runs++;
    /* whatever a launch writes or reads must exist at that moment */
    bool ok = live_buf(r, e->buf) && live_buf(r, e->accum) && live_buf(r, e->gout);
    if (e->run == ME_TL_RUN_FORWARD) {
        const MeNode *n = &r->p->g->n[e->node];
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && !live_buf(r, r->p->vbuf[n->in[i]])) ok = false;
    }
    if (e->run == ME_TL_RUN_BACKWARD) {
        int need[8];
        int k = me_kernel_backward_needs(&r->p->g->n[e->node], e->input, need, 8);
        for (int i = 0; i < k; i++)
            if (!live_buf(r, r->p->vbuf[need[i]])) ok = false;
        if (r->p->extra[e->node] >= 0 && !live_buf(r, r->p->extra[e->node])) ok = false;
        if (e->gout < 0) ok = false;
    }
    if (e->run == ME_TL_RUN_OPTIMIZER && (e->accum < 0 || !live_buf(r, r->p->vbuf[e->value]) || e->gout != r->p->opt_state)) ok = false;
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

/* The model at path with batch, analyzed; NULL (a failed check) when it
 * does not load. */
/* Loads path at batch; with a, also analyzes it (a is the caller's). */
static MemestModel *load(const char *path, int64_t batch, MemestAnalysis **a)
{
    char err[1024];
    MemestLoadSettings ls;
    memest_load_default_settings(&ls);
    ls.batch = batch;
    MemestModel *m = NULL;
    if (memest_model_load(&m, path, &ls, err, sizeof(err)) < 0) {
        CHECK(0, "%s: load: %s", path, err);
        return NULL;
    }
    if (a) {
        MemestAnalyzeSettings as;
        memest_analyze_default_settings(&as);
        CHECK(memest_analyze(m, &as, a, err, sizeof(err)) >= 0, "%s: analyze: %s", path, err);
    }
    return m;
}

static const char *mode_name(MemestRunMode m) { return m == MEMEST_RUN_TRAIN ? "train" : "infer"; }

static void check_case(const char *path, int64_t batch, MemestRunMode mode, MemestOptimizer opt, int step)
{
    char err[1024], label[512];
    snprintf(label, sizeof(label), "%.300s batch %lld %s %s step %d", path, (long long)batch, mode_name(mode),
             mode == MEMEST_RUN_TRAIN ? (opt == MEMEST_OPT_SGD ? "sgd" : opt == MEMEST_OPT_MOMENTUM ? "momentum" : "adam") : "-", step);
    MemestAnalysis *a = NULL;
    MemestModel *m = load(path, batch, &a);
    if (!m) return;
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
    /* 1. the same events as memest's simulation */
    Trace t = { 0 };
    MemestMemory mem;
    MeTlSink sink = { .opaque = &t, .event = trace_event };
    rc = me_timeline_simulate(m, &ms, &sink, &mem, err, sizeof(err));
    CHECK(rc >= 0, "%s: simulate: %s", label, err);
    if (rc >= 0) {
        char msg[1024];
        int d = compare(&p, &t, msg, sizeof(msg));
        CHECK(d < 0, "%s: plan and memest differ: %s", label, msg);
        CHECK(p.n_base > 0 && p.ev[p.n_base].kind == ME_TL_NOTE, "%s: the baseline does not end at the first point", label);
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
    me_free(t.ev);
    me_plan_free(&p);
    memest_analysis_free(&a);
    memest_model_free(&m);
}

/* The stream itself, under every kind of setting (also those the plan
 * refuses: autocast, checkpointing, sharding, the CPU runtime): storages
 * are numbered in order, freed, re-categorized and bound only while alive,
 * runs touch live storages, and the live bytes recounted from the events
 * give memest's peak, event count and end. */
typedef struct Stream {
    int64_t *bytes;
    uint8_t *cat;
    bool *alive;
    int n, cap;
    int64_t live, peak;
    int events;
    int bad;          /* events that break a rule */
    char first[256];  /* the first of them */
} Stream;

static bool stream_live(const Stream *t, int id) { return id >= 0 && id < t->n && t->alive[id]; }

static int stream_event(void *o, const MeTlEvent *e)
{
    Stream *t = o;
    bool ok = true;
    switch (e->kind) {
    case ME_TL_ALLOC:
        ok = e->storage == t->n && e->bytes >= 0;
        if (me_grow(&t->bytes, &t->cap, t->n + 1, sizeof(int64_t)) < 0 || !(t->cat = me_realloc(t->cat, (size_t)t->cap)) ||
            !(t->alive = me_realloc(t->alive, (size_t)t->cap * sizeof(bool))))
            return ME_ENOMEM;
        t->bytes[t->n] = e->bytes;
        t->cat[t->n] = e->cat;
        t->alive[t->n++] = true;
        t->live += e->bytes;
        break;
    case ME_TL_FREE:
        ok = stream_live(t, e->storage) && t->bytes[e->storage] == e->bytes && t->cat[e->storage] == e->cat;
        if (ok) t->alive[e->storage] = false;
        t->live -= e->bytes;
        t->events++;
        break;
    case ME_TL_RECAT:
        ok = stream_live(t, e->storage) && t->cat[e->storage] == e->cat && e->to != e->cat;
        if (ok) t->cat[e->storage] = e->to;
        break;
    case ME_TL_BIND:
        ok = stream_live(t, e->storage) && e->value >= 0;
        break;
    case ME_TL_NOTE:
        if (t->live + e->bytes > t->peak) t->peak = t->live + e->bytes;
        t->events++;
        break;
    case ME_TL_RUN:
        ok = e->run < ME_TL_RUN_COUNT && (e->storage < 0 || stream_live(t, e->storage)) && (e->accum < 0 || stream_live(t, e->accum)) &&
             (e->gout < 0 || stream_live(t, e->gout));
        break;
    default:
        ok = false;
    }
    if (!ok && !t->bad++)
        snprintf(t->first, sizeof(t->first), "%s %s of storage %d at node %d", me_tl_kind_name(e->kind),
                 e->kind == ME_TL_RUN ? me_tl_run_name(e->run) : "", e->storage, e->node);
    return 0;
}

static void check_stream(const char *path, const char *label, const MemestMemorySettings *ms)
{
    char err[1024];
    MemestModel *m = load(path, 2, NULL);
    if (!m) return;
    Stream t = { 0 };
    MemestMemory mem;
    MeTlSink sink = { .opaque = &t, .event = stream_event };
    int rc = me_timeline_simulate(m, ms, &sink, &mem, err, sizeof(err));
    CHECK(rc >= 0, "%s %s: simulate: %s", path, label, err);
    if (rc >= 0) {
        CHECK(t.n > 0 && !t.bad, "%s %s: %d events break the stream's rules, the first: %s", path, label, t.bad, t.first);
        CHECK((uint64_t)t.peak == mem.peak && t.events == mem.events && (uint64_t)t.live == mem.end,
              "%s %s: recounted peak %lld, events %d, end %lld; memest %llu, %d, %llu", path, label, (long long)t.peak, t.events,
              (long long)t.live, (unsigned long long)mem.peak, mem.events, (unsigned long long)mem.end);
    }
    me_free(t.bytes);
    me_free(t.cat);
    me_free(t.alive);
    memest_model_free(&m);
}

static void check_unsupported(const char *path, const char *want)
{
    char err[1024];
    MemestModel *m = load(path, 1, NULL);
    if (!m) return;
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

    static const char *const any[] = { "models/resnet18.json", "models/onnx/zoo/bert_like.onnx", "models/onnx/zoo/squeezenet1_0.onnx",
                                       "models/onnx/zoo/mobilenet_v2.onnx", "models/onnx/resnet18_op17_train.onnx" };
    const MemestMemorySettings T = { .mode = MEMEST_RUN_TRAIN, .optimizer = MEMEST_OPT_ADAM, .runtime = MEMEST_RUNTIME_CUDA, .step = 1 };
    struct { const char *label; MemestMemorySettings s; } modes[] = {
        { "infer", { .mode = MEMEST_RUN_INFER, .runtime = MEMEST_RUNTIME_CUDA, .step = 1 } },
        { "grad cpu", { .mode = MEMEST_RUN_INFER_GRAD, .runtime = MEMEST_RUNTIME_CPU, .step = 1 } },
        { "adam", T },
        { "adam step 2 fp16", T },
        { "sgd cpu mse input_grad", T },
        { "adam checkpoint sqrt", T },
        { "adagrad zero3 x4 bf16", T },
    };
    modes[3].s.step = 2;
    modes[3].s.amp = 1;
    modes[4].s.optimizer = MEMEST_OPT_SGD;
    modes[4].s.runtime = MEMEST_RUNTIME_CPU;
    modes[4].s.loss = MEMEST_LOSS_MSE;
    modes[4].s.input_grad = 1;
    modes[5].s.checkpoint = -1;
    modes[6].s.optimizer = MEMEST_OPT_ADAGRAD;
    modes[6].s.gpus = 4;
    modes[6].s.shard = MEMEST_SHARD_ZERO3;
    modes[6].s.amp = 2;
    for (size_t i = 0; i < sizeof(any) / sizeof(any[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", argv[1], any[i]);
        for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++) check_stream(path, modes[k].label, &modes[k].s);
    }
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
