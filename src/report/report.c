/* Table (torchstat-like), CSV and Markdown reports. */
#include <string.h>

#include "report/report.h"

static void shape_text(const MemestAnalysis *m, const MeValue *v, char *buf, size_t n)
{
    if (!v || !v->known) { snprintf(buf, n, "%s", "?"); return; }
    if (m->conv == MEMEST_CONVENTION_TORCHSTAT) {
        /* torchstat prints one sample, space-separated */
        me_shape_str(&v->shape, buf, n, " ", v->shape.rank > 1 ? 1 : 0);
        return;
    }
    me_shape_str(&v->shape, buf, n, "x", 0);
    if (!v->shape.rank) snprintf(buf, n, "scalar");
}

void me_row_view(const MemestAnalysis *m, int row, MeRowView *rv)
{
    int ni = m->rows[row];
    rv->node = &m->g->n[ni];
    rv->cost = &m->cost[ni];
    rv->time_s = m->time_s ? m->time_s[ni] : 0;
    const MeNode *n = rv->node;
    const MeValue *in = NULL;
    for (int i = 0; i < n->n_in && !in; i++)
        if (n->in[i] >= 0 && m->g->v[n->in[i]].kind != ME_V_INIT) in = &m->g->v[n->in[i]];
    if (!in && n->n_in && n->in[0] >= 0) in = &m->g->v[n->in[0]];
    shape_text(m, in, rv->in_shape, sizeof(rv->in_shape));
    if (!n->n_in) strcpy(rv->in_shape, "-");
    shape_text(m, n->n_out && n->out[0] >= 0 ? &m->g->v[n->out[0]] : NULL, rv->out_shape, sizeof(rv->out_shape));
    rv->rw = me_sadd(rv->cost->read, rv->cost->write);
    rv->mark = rv->cost->status == ME_COST_UNCOUNTED ? '*' : rv->cost->status != ME_COST_OK ? '?' : ' ';
}

int me_op_counts(const MemestAnalysis *m, MeCostStatus status, const char **ops, int *counts, int max)
{
    const MeNode *first[256]; /* a node of each op kind listed so far */
    if (max > 256) max = 256;
    int k = 0;
    int n = status == ME_COST_UNKNOWN_OP ? m->g->nn : m->n_rows;
    for (int i = 0; i < n; i++) {
        int ni = status == ME_COST_UNKNOWN_OP ? i : m->rows[i];
        if (m->cost[ni].status != status) continue;
        const MeNode *node = &m->g->n[ni];
        int j = 0;
        while (j < k && !me_op_same(first[j], node)) j++;
        if (j == k) {
            if (k == max) continue;
            first[k] = node;
            ops[k] = node->op;
            counts[k++] = 0;
        }
        counts[j]++;
    }
    return k;
}

/* 1234567 → "1,234,567" */
static void thousands(uint64_t v, char *buf, size_t n)
{
    char tmp[32];
    int len = (int)me_u64_str(v, tmp), o = 0;
    for (int i = 0; i < len && (size_t)o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
}

/* 3.64G-style, the way torchstat prints its totals */
static void scaled(double v, char *buf, size_t n, const char *unit)
{
    const char *p = "";
    if (v >= 1e12) { v /= 1e12; p = "T"; }
    else if (v >= 1e9) { v /= 1e9; p = "G"; }
    else if (v >= 1e6) { v /= 1e6; p = "M"; }
    else if (v >= 1e3) { v /= 1e3; p = "K"; }
    snprintf(buf, n, "%.2f%s%s", v, p, unit);
}

enum { NCOL = 13 };

/* One table line: index, name, [type], shapes, figures. */
typedef struct Cells { char c[NCOL][128]; } Cells;

static double forward_time(const MemestAnalysis *m)
{
    double t = 0;
    for (int i = 0; m->time_s && i < m->g->nn; i++) t += m->time_s[i];
    return t;
}

/* fwd: forward_time(), computed once per report (0 without a GPU) */
static void duration_cell(double fwd, const MeRowView *rv, char *cell, size_t n)
{
    double t = fwd;
    if (t > 0) snprintf(cell, n, "%.2f%%", 100.0 * rv->time_s / t);
    else snprintf(cell, n, "-");
}

/* a cell holds 127 bytes; longer names and shape lists are cut */
static void cell_cpy(char *cell, const char *s)
{
    size_t l = strnlen(s, 127);
    memcpy(cell, s, l);
    cell[l] = 0;
}

static void row_cells(double fwd, const MeRowView *rv, int idx, Cells *c, bool ts)
{
    char a[40], b[40];
    int k = 0;
    me_i64_str(idx, c->c[k++]);
    cell_cpy(c->c[k++], rv->node->module);
    if (!ts) cell_cpy(c->c[k++], rv->node->op);
    cell_cpy(c->c[k++], rv->in_shape);
    cell_cpy(c->c[k++], rv->out_shape);
    const MeCost *co = rv->cost;
    bool known = co->status == ME_COST_OK || co->status == ME_COST_UNCOUNTED;
    if (ts) {
        /* torchstat's pandas formatting: floats with one decimal, MAdd and
         * Flops with thousands separators */
        snprintf(c->c[k++], 128, "%.1f", (double)co->params);
        snprintf(c->c[k++], 128, "%.2f", (double)co->out_bytes / (1024.0 * 1024.0));
        thousands(co->macs, a, sizeof(a));
        thousands(co->flops, b, sizeof(b));
        snprintf(c->c[k++], 128, "%s.0%c", a, rv->mark);
        snprintf(c->c[k++], 128, "%s.0%c", b, rv->mark);
        snprintf(c->c[k++], 128, "%.1f", (double)co->read);
        snprintf(c->c[k++], 128, "%.1f", (double)co->write);
        duration_cell(fwd, rv, c->c[k++], 128);
        snprintf(c->c[k++], 128, "%.1f", (double)rv->rw);
        return;
    }
    thousands(co->params, c->c[k++], 128);
    snprintf(c->c[k++], 128, "%.2f", (double)co->out_bytes / (1024.0 * 1024.0));
    if (!known) {
        for (int i = 0; i < 4; i++) snprintf(c->c[k++], 128, "?");
        snprintf(c->c[k++], 128, "-");
        snprintf(c->c[k++], 128, "?");
        return;
    }
    thousands(co->macs, c->c[k++], 128);
    thousands(co->flops, c->c[k++], 128);
    thousands(co->read, c->c[k++], 128);
    thousands(co->write, c->c[k++], 128);
    duration_cell(fwd, rv, c->c[k++], 128);
    thousands(rv->rw, c->c[k++], 128);
}

static const char *const head_default[NCOL] = { "", "module name", "type", "input shape", "output shape", "params",
    "memory(MB)", "MACs", "FLOPs", "MemRead(B)", "MemWrite(B)", "duration[%]", "MemR+W(B)" };
/* torchstat's own columns, without the type */
static const char *const head_ts[NCOL - 1] = { "", "module name", "input shape", "output shape", "params", "memory(MB)",
    "MAdd", "Flops", "MemRead(B)", "MemWrite(B)", "duration[%]", "MemR+W(B)" };

static int ncols(bool ts) { return ts ? NCOL - 1 : NCOL; }
static const char *heading(bool ts, int i) { return ts ? head_ts[i] : head_default[i]; }

static void totals_cells(const MemestAnalysis *m, Cells *c, bool ts)
{
    const MemestTotals *t = &m->totals;
    memset(c, 0, sizeof(*c));
    int k = 0;
    snprintf(c->c[k++], 128, "total");
    k += ts ? 3 : 4;
    if (ts) {
        uint64_t p = 0;
        for (int r = 0; r < m->n_rows; r++) p += m->cost[m->rows[r]].params;
        snprintf(c->c[k++], 128, "%.1f", (double)p);
        snprintf(c->c[k++], 128, "%.2f", (double)t->output_bytes / (1024.0 * 1024.0));
        char a[40];
        thousands(t->macs, a, sizeof(a));
        snprintf(c->c[k++], 128, "%s.0", a);
        thousands(t->flops, a, sizeof(a));
        snprintf(c->c[k++], 128, "%s.0", a);
        snprintf(c->c[k++], 128, "%.1f", (double)t->mem_read);
        snprintf(c->c[k++], 128, "%.1f", (double)t->mem_write);
        snprintf(c->c[k++], 128, m->has_gpu ? "100.00%%" : "-");
        snprintf(c->c[k++], 128, "%.1f", (double)(t->mem_read + t->mem_write));
        return;
    }
    thousands(t->params, c->c[k++], 128);
    snprintf(c->c[k++], 128, "%.2f", (double)t->output_bytes / (1024.0 * 1024.0));
    thousands(t->macs, c->c[k++], 128);
    thousands(t->flops, c->c[k++], 128);
    thousands(t->mem_read, c->c[k++], 128);
    thousands(t->mem_write, c->c[k++], 128);
    snprintf(c->c[k++], 128, m->has_gpu ? "100.00%%" : "-");
    thousands(me_sadd(t->mem_read, t->mem_write), c->c[k++], 64);
}

static void fill_row(const MemestAnalysis *m, double fwd, int r, Cells *out, bool ts)
{
    MeRowView rv;
    me_row_view(m, r, &rv);
    row_cells(fwd, &rv, r, out, ts);
}

static void print_lists(const MemestAnalysis *m, FILE *f)
{
    const char *ops[64];
    int counts[64];
    int k = me_op_counts(m, ME_COST_UNKNOWN_OP, ops, counts, 64);
    if (k) {
        fprintf(f, "Unknown ops (no shape inference, no cost; --strict makes this an error):");
        for (int i = 0; i < k; i++) fprintf(f, " %s x%d", ops[i], counts[i]);
        fprintf(f, "\n");
    }
    int cw = 0;
    for (int i = 0; i < m->g->nv; i++)
        if (m->g->v[i].from_constant && m->g->v[i].n_uses)
            fprintf(f, "%s '%s'", cw++ ? "," : "Weights held in Constant nodes (counted as parameters, in memory as weights):", m->g->v[i].name);
    if (cw) fprintf(f, "\n");
    k = me_op_counts(m, ME_COST_UNCOUNTED, ops, counts, 64);
    if (k) {
        fprintf(f, "* not counted by %s (its totals leave these out; the rows show memest's own figures):", memest_convention_name(m->conv));
        for (int i = 0; i < k; i++) fprintf(f, " %s x%d", ops[i], counts[i]);
        fprintf(f, "\n");
    }
    k = me_op_counts(m, ME_COST_NO_SHAPE, ops, counts, 64);
    if (k) {
        fprintf(f, "? shapes unknown below an unknown op:");
        for (int i = 0; i < k; i++) fprintf(f, " %s x%d", ops[i], counts[i]);
        fprintf(f, "\n");
    }
}

const char *me_mode_name(const MemestMemorySettings *s)
{
    static const char *const n[] = { "inference (no_grad)", "inference with autograd", "training" };
    return (int)s->mode >= 0 && s->mode <= MEMEST_RUN_TRAIN ? n[s->mode] : "?";
}

const char *me_optimizer_name(MemestOptimizer o)
{
    static const char *const n[] = { "sgd", "momentum", "adam", "adamw", "adagrad", "rmsprop", "none" };
    return (int)o >= 0 && o < MEMEST_OPT_COUNT ? n[o] : "?";
}

const char *me_phase_name(MemestPhase p)
{
    return p == MEMEST_PHASE_FORWARD ? "forward" : p == MEMEST_PHASE_BACKWARD ? "backward" : "optimizer";
}

static void thousands(uint64_t v, char *buf, size_t n);

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_memory(const MemestAnalysis *m, FILE *f)
{
    if (!m->has_memory) return;
    const MemestMemorySettings *s = &m->memory.settings;
    fprintf(f, "\nMemory, %s", me_mode_name(s));
    if (s->mode == MEMEST_RUN_TRAIN)
        fprintf(f, " with %s, loss %s", me_optimizer_name(s->optimizer), s->loss == MEMEST_LOSS_MSE ? "mse" : "cross-entropy");
    if (s->amp) fprintf(f, ", autocast %s", s->amp == 2 ? "bf16" : "fp16");
    fprintf(f, ", runtime %s (%s; MiB = 2^20 bytes):\n", s->runtime == MEMEST_RUNTIME_CPU ? "cpu" : "cuda",
            s->runtime == MEMEST_RUNTIME_CPU ? "peak of bytes the CPU allocator hands out" : "peaks as torch.cuda reports them");
    if (!m->memory.n_mem) {
        fprintf(f, "  not simulated: %s\n", m->memory.skipped);
        return;
    }
    if (m->memory.assumed[0]) fprintf(f, "  assumed: %s\n", m->memory.assumed);
    for (int k = 0; k < m->memory.n_mem; k++) {
        const MemestMemory *r = &m->memory.mem[k];
        if (s->mode == MEMEST_RUN_TRAIN && m->memory.n_mem > 1) fprintf(f, "  step %d%s: ", k + 1, k ? " (steady state)" : " (creates optimizer state)");
        else fprintf(f, "  ");
        fprintf(f, "peak %.2f MiB at %s (%s); before %.2f MiB, after %.2f MiB\n", mib(r->peak_allocated), r->peak_name,
                me_phase_name(r->peak_phase), mib(r->baseline), mib(r->end));
        if (s->runtime == MEMEST_RUNTIME_CUDA)
            fprintf(f, "    max_memory_allocated %.2f MiB (requests %.2f + 512 B rounding %.2f), max_memory_reserved %.2f MiB "
                       "(caching allocator), nvidia-smi ~%.2f MiB (+ CUDA context %.0f MiB, estimated)\n",
                    mib(r->peak_allocated), mib(r->peak), mib(r->peak_allocated - r->peak), mib(r->peak_reserved),
                    mib(r->nvidia_smi), mib(r->cuda_context));
        if (r->segments) {
            char rm[40];
            thousands(r->recompute_macs, rm, sizeof(rm));
            fprintf(f, "    checkpointing: %d checkpointed segment(s) (the last runs normally), %s MACs recomputed in backward\n",
                    r->segments, rm);
        }
        fprintf(f, "    at the peak:");
        for (int c = 0; c < MEMEST_MEM_COUNT; c++)
            if (r->at_peak[c] >= 1024) fprintf(f, " %s %.2f", memest_mem_category_name((MemestMemCategory)c), mib(r->at_peak[c]));
        fprintf(f, "\n");
    }
}

static void print_device(const MemestAnalysis *m, FILE *f)
{
    if (!m->has_gpu) return;
    const MemestGpu *g = &m->gpu;
    fprintf(f, "\nGPU %s: %.2f GiB, %.0f GB/s, %.1f TFLOP/s fp32, %.1f TFLOP/s fp16/bf16", g->name,
            (double)g->memory / (1u << 30), g->bandwidth / 1e9, g->fp32_flops / 1e12, g->fp16_flops / 1e12);
    if (m->has_memory && m->memory.settings.gpus > 1) {
        static const char *const sh[] = { "ddp", "zero1", "zero2", "zero3" };
        fprintf(f, "; %d GPUs, %s (figures per GPU)", m->memory.settings.gpus, sh[m->memory.settings.shard & 3]);
    }
    fprintf(f, "\n");
    if (m->has_memory && m->memory.n_mem) {
        uint64_t need = memest_memory_needed(m);
        bool fits = need <= g->memory;
        fprintf(f, "  %s: needs %.2f MiB (%s), %s %.2f MiB\n", fits ? "fits" : "DOES NOT FIT", mib(need),
                m->memory.settings.runtime == MEMEST_RUNTIME_CUDA ? "allocated at the peak + CUDA context" : "allocated at the peak",
                fits ? "headroom" : "short by", mib(fits ? g->memory - need : need - g->memory));
    }
    MemestTiming t;
    if (memest_timing(m, &t) == 0) {
        fprintf(f, "  roofline: forward %.3f ms", t.forward_s * 1e3);
        if (t.backward_s > 0)
            fprintf(f, ", backward %.3f ms, optimizer %.3f ms%s", t.backward_s * 1e3, t.optimizer_s * 1e3, t.recompute_s > 0 ? ", recompute" : "");
        if (t.recompute_s > 0) fprintf(f, " %.3f ms", t.recompute_s * 1e3);
        fprintf(f, "; step %.3f ms, %.1f samples/s (batch %d)\n", t.step_s * 1e3, t.samples_per_s, t.batch);
    }
    if (m->has_max_batch) {
        const MemestMaxBatch *b = &m->max_batch;
        if (b->batch > 0)
            fprintf(f, "  largest batch that fits: %lld (needs %.2f MiB; %lld needs %.2f MiB), from %d timelines\n",
                    (long long)b->batch, mib(b->needed), (long long)b->batch + 1, mib(b->needed_next), b->simulations);
        else
            fprintf(f, "  largest batch that fits: none (batch 1 needs %.2f MiB)\n", mib(b->needed_next));
    }
}

/* A line under construction: rows are built in memory and written with
 * one fwrite (a million rows through fputc's locking cost most of a
 * second). */
typedef struct Line {
    char *p;
    size_t n, cap;
    bool failed;
} Line;

static void put(Line *l, const char *s, size_t len)
{
    if (l->n + len + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : 256;
        while (cap < l->n + len + 1) cap *= 2;
        char *p = me_realloc(l->p, cap);
        if (!p) { l->failed = true; return; }
        l->p = p;
        l->cap = cap;
    }
    memcpy(l->p + l->n, s, len);
    l->n += len;
}

static void puts_line(Line *l, const char *s) { put(l, s, strlen(s)); }

static void pad(Line *l, int n)
{
    static const char spaces[] = "                                                                ";
    for (; n > 0; n -= 64) put(l, spaces, (size_t)(n < 64 ? n : 64));
}

static int report_table(const MemestAnalysis *m, FILE *f)
{
    bool ts = m->conv == MEMEST_CONVENTION_TORCHSTAT;
    int nc = ncols(ts);
    Cells tot;
    int w[NCOL] = { 0 };
    for (int i = 0; i < nc; i++) w[i] = (int)strlen(heading(ts, i));
    /* Cells are kept as packed NUL-separated text (widths need every row
     * first); fixed Cells per row would cost 1.5 KB a row. */
    Line text = { 0 };
    Cells one;
    double fwd = m->has_gpu ? forward_time(m) : 0;
    for (int r = 0; r < m->n_rows && !text.failed; r++) {
        fill_row(m, fwd, r, &one, ts);
        for (int i = 0; i < nc; i++) {
            size_t l = strlen(one.c[i]);
            if ((int)l > w[i]) w[i] = (int)l;
            put(&text, one.c[i], l + 1);
        }
    }
    if (text.failed) {
        me_free(text.p);
        return ME_ENOMEM;
    }
    totals_cells(m, &tot, ts);
    for (int i = 0; i < nc; i++) {
        int l = (int)strlen(tot.c[i]);
        if (l > w[i]) w[i] = l;
    }
    int total_w = 0;
    for (int i = 0; i < nc; i++) {
        fprintf(f, "%s%*s", i ? "  " : "", w[i], heading(ts, i));
        total_w += w[i] + (i ? 2 : 0);
    }
    fprintf(f, "\n");
    Line out = { 0 };
    const char *cell = text.p;
    for (int r = 0; r < m->n_rows && !out.failed; r++) {
        for (int i = 0; i < nc; i++) {
            size_t l = strlen(cell);
            if (i) put(&out, "  ", 2);
            pad(&out, w[i] - (int)l);
            put(&out, cell, l);
            cell += l + 1;
        }
        put(&out, "\n", 1);
        if (out.n >= 1 << 20 || r == m->n_rows - 1) {
            fwrite(out.p, 1, out.n, f);
            out.n = 0;
        }
    }
    bool failed = out.failed;
    me_free(out.p);
    me_free(text.p);
    if (failed) return ME_ENOMEM;
    for (int i = 0; i < nc; i++) fprintf(f, i == 0 ? "%-*s" : "  %*s", w[i], tot.c[i]);
    fprintf(f, "\n");
    for (int i = 0; i < total_w; i++) fputc('=', f);
    fputc('\n', f);

    const MemestTotals *t = &m->totals;
    char a[40], b[40];
    if (ts) {
        uint64_t p = 0;
        for (int r = 0; r < m->n_rows; r++) p += m->cost[m->rows[r]].params;
        thousands(p, a, sizeof(a));
        fprintf(f, "Total params: %s\n", a);
        for (int i = 0; i < total_w; i++) fputc('-', f);
        fputc('\n', f);
        fprintf(f, "Total memory: %.2fMB\n", (double)t->output_bytes / (1024.0 * 1024.0));
        scaled((double)t->macs, a, sizeof(a), "MAdd");
        fprintf(f, "Total MAdd: %s\n", a);
        scaled((double)t->flops, a, sizeof(a), "Flops");
        fprintf(f, "Total Flops: %s\n", a);
        fprintf(f, "Total MemR+W: %.2fMB\n", (double)(t->mem_read + t->mem_write) / (1024.0 * 1024.0));
        fprintf(f, "(convention torchstat: one sample, as torchstat forces batch 1; MB = 2^20 bytes)\n");
        print_lists(m, f);
        print_memory(m, f);
        print_device(m, f);
        return 0;
    }
    int64_t batch = m->g->n_inputs ? m->g->v[m->g->inputs[0]].shape.d[0] : 1;
    thousands(t->params, a, sizeof(a));
    fprintf(f, "Total params: %s (%.2f MiB)", a, (double)t->param_bytes / (1024.0 * 1024.0));
    if (t->buffers) {
        thousands(t->buffers, b, sizeof(b));
        fprintf(f, ", buffers: %s", b);
    }
    fprintf(f, "\n");
    thousands(t->macs, a, sizeof(a));
    scaled((double)t->macs, b, sizeof(b), "");
    fprintf(f, "Total MACs: %s (%s)\n", a, b);
    thousands(t->flops, a, sizeof(a));
    scaled((double)t->flops, b, sizeof(b), "");
    fprintf(f, "Total FLOPs: %s (%s)\n", a, b);
    fprintf(f, "Total memory (sum of layer outputs): %.2f MiB\n", (double)t->output_bytes / (1024.0 * 1024.0));
    fprintf(f, "Total MemR+W: %.2f MiB\n", (double)me_sadd(t->mem_read, t->mem_write) / (1024.0 * 1024.0));
    fprintf(f, "Seed view (every layer output summed, in-place layers skipped): %.4f MB forward, %.4f MB with backward (x2); MB = 10^6 bytes\n",
            (double)t->seed_sum_bytes / 1e6, 2.0 * (double)t->seed_sum_bytes / 1e6);
    fprintf(f, "(batch %lld, convention default: MACs of contractions, FLOPs = 2 x MACs + other arithmetic; doc/conventions.md)\n",
            (long long)batch);
    print_lists(m, f);
    print_memory(m, f);
    print_device(m, f);
    return 0;
}


static void csv_field(Line *l, const char *s)
{
    if (!strpbrk(s, ",\"\n")) { puts_line(l, s); return; }
    put(l, "\"", 1);
    for (; *s; s++) {
        if (*s == '"') put(l, "\"", 1);
        put(l, s, 1);
    }
    put(l, "\"", 1);
}

static void md_field(Line *l, const char *s)
{
    put(l, "| ", 2);
    for (const char *t; (t = strchr(s, '|')); s = t + 1) {
        put(l, s, (size_t)(t - s));
        put(l, "\\|", 2);
    }
    puts_line(l, s);
    put(l, " ", 1);
}

static int report_csv(const MemestAnalysis *m, FILE *f, bool markdown)
{
    static const char *const cols[] = { "module", "type", "input_shape", "output_shape", "params", "output_bytes",
        "macs", "flops", "mem_read", "mem_write", "mem_rw", "counted" };
    int nc = (int)(sizeof(cols) / sizeof(cols[0]));
    bool ts = m->conv == MEMEST_CONVENTION_TORCHSTAT;
    for (int i = 0; i < nc; i++) {
        const char *h = cols[i];
        if (ts && i == 6) h = "madd";
        fprintf(f, markdown ? "| %s " : "%s%s", markdown ? h : (i ? "," : ""), markdown ? "" : h);
    }
    fprintf(f, markdown ? "|\n" : "\n");
    if (markdown) {
        for (int i = 0; i < nc; i++) fprintf(f, i >= 4 && i < 11 ? "|---:" : "|---");
        fprintf(f, "|\n");
    }
    Line l = { 0 };
    for (int r = 0; r < m->n_rows && !l.failed; r++) {
        MeRowView rv;
        me_row_view(m, r, &rv);
        const MeCost *c = rv.cost;
        const char *counted = c->status == ME_COST_OK ? "yes" : c->status == ME_COST_UNCOUNTED ? "uncounted" : "unknown";
        char num[7][24];
        uint64_t vals[7] = { c->params, c->out_bytes, c->macs, c->flops, c->read, c->write, rv.rw };
        for (int i = 0; i < 7; i++) me_u64_str(vals[i], num[i]);
        const char *cells[12] = { rv.node->module, rv.node->op, rv.in_shape, rv.out_shape, num[0], num[1], num[2],
                                  num[3], num[4], num[5], num[6], counted };
        for (int i = 0; i < nc; i++) {
            if (markdown) {
                md_field(&l, cells[i]);
            } else {
                if (i) put(&l, ",", 1);
                csv_field(&l, cells[i]);
            }
        }
        puts_line(&l, markdown ? "|\n" : "\n");
        if (l.n >= 1u << 16 || r == m->n_rows - 1) {
            if (!l.failed && fwrite(l.p, 1, l.n, f) != l.n) l.failed = true;
            l.n = 0;
        }
    }
    me_free(l.p);
    if (l.failed) return ME_ENOMEM;
    if (markdown) {
        const MemestTotals *t = &m->totals;
        fprintf(f, "\n**Totals** (convention %s): params %llu, MACs%s %llu, FLOPs %llu, MemR+W %llu bytes\n",
                memest_convention_name(m->conv), (unsigned long long)t->params, ts ? " (MAdd)" : "",
                (unsigned long long)t->macs, (unsigned long long)t->flops, (unsigned long long)(t->mem_read + t->mem_write));
    }
    return 0;
}

int memest_format_from_name(const char *name)
{
    static const char *const names[] = { "table", "json", "csv", "markdown" };
    for (int i = 0; i < 4; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

int memest_report(const MemestAnalysis *m, MemestFormat fmt, FILE *f)
{
    if (!m || !f) return ME_EINVAL;
    if (me_analysis_current(m) < 0) return ME_ESTALE;
    switch (fmt) {
    case MEMEST_FORMAT_TABLE: return report_table(m, f);
    case MEMEST_FORMAT_JSON: return me_report_json(m, f);
    case MEMEST_FORMAT_CSV: return report_csv(m, f, false);
    case MEMEST_FORMAT_MARKDOWN: return report_csv(m, f, true);
    default: return ME_EINVAL;
    }
}

typedef struct ReportJob {
    const MemestAnalysis *a;
    MemestFormat fmt;
} ReportJob;

static int render_report(const void *ctx, FILE *f)
{
    const ReportJob *j = ctx;
    return memest_report(j->a, j->fmt, f);
}

int memest_report_write(const MemestAnalysis *a, MemestFormat fmt, MemestWriteFn write, void *opaque)
{
    ReportJob j = { a, fmt };
    return me_render_to(write, opaque, render_report, &j);
}

int memest_report_string(const MemestAnalysis *a, MemestFormat fmt, char **out, size_t *len)
{
    ReportJob j = { a, fmt };
    return me_render_string(out, len, render_report, &j);
}
