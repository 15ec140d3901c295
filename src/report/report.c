/* Table (torchstat-like), CSV and Markdown reports. */
#include <string.h>

#include "optim.h"
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

/* a cell holds 127 bytes; longer names and shape lists are cut. Names come
 * from the model file: control characters are escaped, not printed raw. */
static void cell_cpy(char *cell, const char *s) { me_escape(s, cell, 128); }

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
    "memory(MiB)", "MACs", "FLOPs", "MemRead(B)", "MemWrite(B)", "duration[%]", "MemR+W(B)" };
/* torchstat's own columns, without the type; its "MB" is 2^20 bytes, kept
 * as torchstat prints it (the header line above the table says so) */
static const char *const head_ts[NCOL - 1] = { "", "module name", "input shape", "output shape", "params", "memory(MB)",
    "MAdd", "Flops", "MemRead(B)", "MemWrite(B)", "duration[%]", "MemR+W(B)" };

static int ncols(bool ts) { return ts ? NCOL - 1 : NCOL; }
static const char *heading(bool ts, int i) { return ts ? head_ts[i] : head_default[i]; }

static void totals_cells(const MemestAnalysis *m, double fwd, Cells *c, bool ts)
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
        snprintf(c->c[k++], 128, fwd > 0 ? "100.00%%" : "-");
        snprintf(c->c[k++], 128, "%.1f", (double)(t->mem_read + t->mem_write));
        return;
    }
    thousands(t->params, c->c[k++], 128);
    snprintf(c->c[k++], 128, "%.2f", (double)t->output_bytes / (1024.0 * 1024.0));
    thousands(t->macs, c->c[k++], 128);
    thousands(t->flops, c->c[k++], 128);
    thousands(t->mem_read, c->c[k++], 128);
    thousands(t->mem_write, c->c[k++], 128);
    snprintf(c->c[k++], 128, fwd > 0 ? "100.00%%" : "-");
    thousands(me_sadd(t->mem_read, t->mem_write), c->c[k++], 64);
}

static void fill_row(const MemestAnalysis *m, double fwd, int r, Cells *out, bool ts)
{
    MeRowView rv;
    me_row_view(m, r, &rv);
    row_cells(fwd, &rv, r, out, ts);
}

static bool note_applies(const MemestAnalysis *a, const MeNote *n)
{
    if (n->when == ME_NOTE_TRAIN) return a->has_memory && a->memory.settings.mode == MEMEST_RUN_TRAIN;
    if (n->when == ME_NOTE_NOGRAD) return a->has_memory && a->memory.settings.mode == MEMEST_RUN_INFER;
    return n->when != ME_NOTE_AUTOGRAD || (a->has_memory && a->memory.settings.mode != MEMEST_RUN_INFER);
}

const char *memest_note_text(const MemestAnalysis *a, int i, const char **code)
{
    if (!a || i < 0) return NULL;
    for (int k = 0; k < a->g->nnotes; k++) {
        const MeNote *n = &a->g->notes[k];
        if (!note_applies(a, n) || i--) continue;
        if (code) *code = n->code;
        return n->text;
    }
    /* the analysis's and the memory run's own notes, after the graph's */
    const struct { const char *code, *text; } run[] = {
        { "tool_spelling", a->conv_note },
        { "python_names", a->has_memory ? a->memory.names_note : "" },
        { "optimizer_impl", a->has_memory ? a->memory.impl_note : "" },
        { "cudnn_workspace", a->has_memory ? a->memory.lib_note : "" },
        { "attention_sdpa", a->has_memory ? a->memory.attn_note : "" },
    };
    for (size_t k = 0; k < sizeof(run) / sizeof(run[0]); k++) {
        if (!run[k].text[0] || i--) continue;
        if (code) *code = run[k].code;
        return run[k].text;
    }
    return NULL;
}

static void print_notes(const MemestAnalysis *m, FILE *f)
{
    const char *text;
    for (int i = 0; (text = memest_note_text(m, i, NULL)); i++)
        fprintf(f, "%s %s\n", i ? "      " : "Notes:", text); /* the passes escape the names they quote */
}

static void print_lists(const MemestAnalysis *m, FILE *f)
{
    const char *ops[64];
    char name[128];
    int counts[64];
    int k = me_op_counts(m, ME_COST_UNKNOWN_OP, ops, counts, 64);
    if (k) {
        fprintf(f, "Unknown ops (no shape inference, no cost; --strict makes this an error):");
        for (int i = 0; i < k; i++) fprintf(f, " %s x%d", me_escape(ops[i], name, sizeof(name)), counts[i]);
        fprintf(f, "\n");
    }
    static const char *const held[2] = {
        "Weights held in Constant nodes (counted as parameters, in memory as weights):",
        "Buffers held in Constant nodes (tables the forward slices; not parameters, in memory as weights):",
    };
    for (int b = 0; b < 2; b++) {
        int cw = 0;
        for (int i = 0; i < m->g->nv; i++)
            if (m->g->v[i].from_constant && m->g->v[i].n_uses && (m->g->v[i].role == ME_R_BUFFER) == b)
                fprintf(f, "%s '%s'", cw++ ? "," : held[b], me_escape(m->g->v[i].name, name, sizeof(name)));
        if (cw) fprintf(f, "\n");
    }
    k = me_op_counts(m, ME_COST_UNCOUNTED, ops, counts, 64);
    if (k) {
        fprintf(f, "* not counted by %s (its totals leave these out; the rows show memest's own figures):", memest_convention_name(m->conv));
        for (int i = 0; i < k; i++) fprintf(f, " %s x%d", me_escape(ops[i], name, sizeof(name)), counts[i]);
        fprintf(f, "\n");
    }
    k = me_op_counts(m, ME_COST_NO_SHAPE, ops, counts, 64);
    if (k) {
        fprintf(f, "? shapes unknown below an unknown op:");
        for (int i = 0; i < k; i++) fprintf(f, " %s x%d", me_escape(ops[i], name, sizeof(name)), counts[i]);
        fprintf(f, "\n");
    }
    print_notes(m, f);
}

const char *me_mode_name(const MemestMemorySettings *s)
{
    static const char *const n[] = { "inference (no_grad)", "inference with autograd", "training" };
    return (int)s->mode >= 0 && s->mode <= MEMEST_RUN_TRAIN ? n[s->mode] : "?";
}

const char *me_mode_key(MemestRunMode mode)
{
    static const char *const n[] = { "infer", "infer_grad", "train" };
    return n[mode];
}

const char *me_autocast_key(int amp) { return amp == 2 ? "bfloat16" : amp == 1 ? "float16" : "off"; }

/* What the simulated modules do, whatever mode the file was exported in:
 * --train is model.train() (Dropout masks, BatchNorm batch statistics),
 * inference with or without autograd is model.eval(). */
const char *me_module_mode(const MemestMemorySettings *s)
{
    return s->mode == MEMEST_RUN_TRAIN ? "train" : "eval";
}

const char *me_optimizer_name(MemestOptimizer o)
{
    const MeOptimizer *d = me_optimizer(o);
    return d ? d->name : "?";
}

const char *me_phase_name(MemestPhase p)
{
    return p == MEMEST_PHASE_FORWARD ? "forward" : p == MEMEST_PHASE_BACKWARD ? "backward" : "optimizer";
}

const char *me_shard_name(int shard)
{
    static const char *const n[] = { "ddp", "zero1", "zero2", "zero3" };
    return n[shard & 3];
}

static void thousands(uint64_t v, char *buf, size_t n);

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* "8 GPUs, zero3" when the figures are one GPU's of several, else NULL
 * (buf holds the text). */
static const char *per_gpu(const MemestAnalysis *m, char *buf, size_t n)
{
    if (!m->has_memory || m->memory.settings.gpus <= 1) return NULL;
    snprintf(buf, n, "%d GPUs, %s", m->memory.settings.gpus, me_shard_name(m->memory.settings.shard));
    return buf;
}

/* --pp: the stages side by side; the figures above are the worst one's */
static void print_pipeline(const MemestPipeline *p, FILE *f)
{
    fprintf(f, "  pipeline: %d stages, %d micro-batches, 1F1B (Megatron-LM); bubble (P-1)/M = %.3f; the figures above are\n"
               "  stage %d's one micro-batch; per GPU it needs %.2f MiB (with the micro-batches it holds in flight):\n",
            p->stages, p->micro_batches, p->bubble, p->worst, p->stage[p->worst].needed / 1048576.0);
    for (int s = 0; s < p->stages; s++) {
        const MemestPipelineStage *st = &p->stage[s];
        fprintf(f, "    stage %d: layers %d-%d, %d in flight: %.2f MiB = max(one micro-batch's step %.2f, its forward+backward %.2f "
                   "+ %d x %.2f held + %.2f earlier gradients) (weights %.2f MiB)%s\n",
                s, st->first_layer, st->first_layer + st->layers - 1, st->in_flight, st->needed / 1048576.0, st->peak / 1048576.0,
                st->backward_peak / 1048576.0, st->in_flight - 1, st->held / 1048576.0, st->grads_extra / 1048576.0,
                st->weights / 1048576.0, s == p->worst ? "  <- worst" : "");
    }
    if (p->step_s > 0)
        fprintf(f, "    step: (M + P - 1) x the slowest stage's forward+backward + its optimizer = %.3f ms (roofline)\n", p->step_s * 1e3);
}

static void print_memory(const MemestAnalysis *m, FILE *f)
{
    if (!m->has_memory) return;
    const MemestMemorySettings *s = &m->memory.settings;
    char name[256], pg[64];
    fprintf(f, "\nMemory, %s", me_mode_name(s));
    MemestOptimizerImpl impl = memest_optimizer_impl_of(s); /* single, the 1.13 default, unnamed */
    if (s->mode == MEMEST_RUN_TRAIN)
        fprintf(f, " with %s%s%s, loss %s", me_optimizer_name(s->optimizer), impl ? " " : "",
                impl ? memest_optimizer_impl_name(impl) : "", memest_loss_name(s->loss));
    if (s->torch != MEMEST_TORCH_1_13) fprintf(f, ", torch %s", memest_torch_name((MemestTorch)s->torch));
    fprintf(f, ", module mode %s", me_module_mode(s));
    if (s->amp) fprintf(f, ", autocast %s", s->amp == 2 ? "bf16" : "fp16");
    fprintf(f, ", runtime %s (%s; MiB = 2^20 bytes):\n", s->runtime == MEMEST_RUNTIME_CPU ? "cpu" : "cuda",
            s->runtime == MEMEST_RUNTIME_CPU ? "peak of bytes the CPU allocator hands out" : "peaks as torch.cuda reports them");
    if (per_gpu(m, pg, sizeof(pg)))
        fprintf(f, "  per GPU (%s): every figure below is what one GPU holds%s\n", pg,
                s->mode == MEMEST_RUN_TRAIN ? "" : "; inference keeps a whole model on each");
    if (!m->memory.n_mem) {
        fprintf(f, "  not simulated: %s\n", me_escape(m->memory.skipped, name, sizeof(name)));
        return;
    }
    if (m->memory.assumed[0]) fprintf(f, "  assumed: %s\n", m->memory.assumed);
    for (int k = 0; k < m->memory.n_mem; k++) {
        const MemestMemory *r = &m->memory.mem[k];
        if (s->mode == MEMEST_RUN_TRAIN && m->memory.n_mem > 1) fprintf(f, "  step %d%s: ", k + 1, k ? " (steady state)" : " (creates optimizer state)");
        else if (s->mode == MEMEST_RUN_INFER_GRAD && m->memory.n_mem > 1) /* memory.c: the loop without no_grad */
            fprintf(f, "  call %d%s: ", k + 1, k ? " (steady state: the last call's output and autograd graph still alive)" : "");
        else if (s->mode == MEMEST_RUN_INFER && m->memory.n_mem > 1) /* memory.c: CUDA's later calls */
            fprintf(f, "  call %d%s: ", k + 1, k ? " (steady state: cuBLAS's workspace made by call 1)" : "");
        else fprintf(f, "  ");
        fprintf(f, "peak %.2f MiB at %s (%s); before %.2f MiB, after %.2f MiB\n", mib(r->peak_allocated),
                me_escape(r->peak_name, name, sizeof(name)), me_phase_name(r->peak_phase), mib(r->baseline), mib(r->end));
        if (s->runtime == MEMEST_RUNTIME_CUDA) {
            /* one figure a line: the first is the one a card must hold */
            fprintf(f, "    max_memory_allocated  %10.2f MiB  (requests %.2f + 512 B rounding %.2f; + CUDA context is what must fit)\n",
                    mib(r->peak_allocated), mib(r->peak), mib(r->peak_allocated - r->peak));
            fprintf(f, "    max_memory_reserved   %10.2f MiB  (caching allocator; freed and retried before an out-of-memory)\n",
                    mib(r->peak_reserved));
            fprintf(f, "    nvidia-smi, estimated %10.2f MiB  (reserved + CUDA context %.0f MiB, estimated)\n", mib(r->nvidia_smi),
                    mib(r->cuda_context));
        }
        if (r->peak_frames > r->peak_allocated)
            fprintf(f, "    if every tensor were a named Python local: peak %.2f MiB (+%.1f %%), the most names can hold\n",
                    mib(r->peak_frames), 100.0 * (double)(r->peak_frames - r->peak_allocated) / (double)(r->peak_allocated ? r->peak_allocated : 1));
        if (r->segments) {
            char rm[40];
            thousands(r->recompute_macs, rm, sizeof(rm));
            fprintf(f, "    checkpointing: %d checkpointed segment(s) (%s), %s MACs recomputed in backward\n", r->segments,
                    s->checkpoint == MEMEST_CHECKPOINT_LAYERS ? "one per layer"
                    : s->checkpoint == MEMEST_CHECKPOINT_SELECTIVE ? "each layer's core attention" : "the last runs normally", rm);
        }
        fprintf(f, "    at the peak (MiB):");
        for (int c = 0; c < MEMEST_MEM_COUNT; c++)
            if (r->at_peak[c] >= 1024) fprintf(f, " %s %.2f", memest_mem_category_name((MemestMemCategory)c), mib(r->at_peak[c]));
        fprintf(f, "\n");
        if (s->offload)
            fprintf(f, "    host (ZeRO-Offload, not on the GPU): %.2f MiB: fp32 master weights, gradients and optimizer state%s\n",
                    mib(r->host), s->offload == MEMEST_OFFLOAD_PARAMS ? ", the parameters" : "");
        if (me_optimizer_paged(s->optimizer))
            fprintf(f, "    optimizer_paged %.2f MiB: CUDA unified memory (bitsandbytes' paged state), on the device until it runs\n"
                       "      short, then paged to host; counted above as resident device memory, which torch.cuda's counters do not see\n",
                    mib(r->at_peak[MEMEST_MEM_OPTIMIZER_PAGED]));
    }
    if (m->has_pipeline) print_pipeline(&m->pipeline, f);
}

const char *me_roofline_missing(const MemestAnalysis *m)
{
    /* memest_timing succeeds exactly when the GPU's roofline is known: ask
     * that, not for a sum over every node the caller makes anyway */
    if (!m->has_gpu || me_roofline_known(&m->gpu)) return NULL;
    return "no memory bandwidth or FLOP/s known for this GPU (--gpu-mem gives only its capacity; --gpu NAME or "
           "--gpu-file gives them)";
}

/* What must fit on the card: the figure that raises out-of-memory. */
static const char *needed_what(const MemestAnalysis *m)
{
    return m->memory.settings.runtime == MEMEST_RUNTIME_CUDA
               ? "max_memory_allocated at the peak + CUDA context, the figure that runs out of memory"
               : "bytes allocated at the peak";
}

/* The short answer to "does it fit", first in the table when a GPU is given. */
static void print_answer(const MemestAnalysis *m, FILE *f)
{
    if (!m->has_gpu) return;
    const MemestGpu *g = &m->gpu;
    char name[128], pg[64];
    me_escape(g->name, name, sizeof(name));
    if (!m->has_memory || !m->memory.n_mem) {
        fprintf(f, "%s (%.2f GiB): cannot say whether it fits: %s\n\n", name, (double)g->memory / (1u << 30),
                m->has_memory ? "the memory step was not simulated (see Memory below)" : "no memory step was simulated");
        return;
    }
    uint64_t need = memest_memory_needed(m);
    bool fits = need <= g->memory;
    const char *shared = per_gpu(m, pg, sizeof(pg));
    fprintf(f, "%s on %s (%.2f GiB = %.2f MiB): needs %.2f MiB, %s %.2f MiB%s%s%s\n", fits ? "FITS" : "DOES NOT FIT", name,
            (double)g->memory / (1u << 30), mib(g->memory), mib(need), fits ? "headroom" : "short by",
            mib(fits ? g->memory - need : need - g->memory), shared ? " (per GPU: " : "", shared ? shared : "",
            shared ? ")" : "");
    fprintf(f, "  compared with the card: %s\n\n", needed_what(m));
}

static void print_device(const MemestAnalysis *m, FILE *f)
{
    if (!m->has_gpu) return;
    const MemestGpu *g = &m->gpu;
    const char *no_roof = me_roofline_missing(m);
    char name[128], pg[64];
    me_escape(g->name, name, sizeof(name));
    if (no_roof)
        fprintf(f, "\nGPU %s: %.2f GiB (capacity only)", name, (double)g->memory / (1u << 30));
    else
        fprintf(f, "\nGPU %s: %.2f GiB, %.0f GB/s, %.1f TFLOP/s fp32, %.1f TFLOP/s fp16/bf16", name,
                (double)g->memory / (1u << 30), g->bandwidth / 1e9, g->fp32_flops / 1e12, g->fp16_flops / 1e12);
    if (per_gpu(m, pg, sizeof(pg))) fprintf(f, "; %s (figures per GPU)", pg);
    fprintf(f, "\n");
    if (m->has_memory && m->memory.n_mem) {
        uint64_t need = memest_memory_needed(m);
        bool fits = need <= g->memory;
        fprintf(f, "  %s: needs %.2f MiB (%s), %s %.2f MiB\n", fits ? "fits" : "DOES NOT FIT", mib(need), needed_what(m),
                fits ? "headroom" : "short by", mib(fits ? g->memory - need : need - g->memory));
    }
    MemestTiming t;
    if (no_roof) {
        fprintf(f, "  roofline: left out: %s\n", no_roof);
    } else if (memest_timing(m, &t) == 0) {
        fprintf(f, "  roofline: forward %.3f ms", t.forward_s * 1e3);
        if (t.backward_s > 0)
            fprintf(f, ", backward %.3f ms, optimizer %.3f ms%s", t.backward_s * 1e3, t.optimizer_s * 1e3, t.recompute_s > 0 ? ", recompute" : "");
        if (t.recompute_s > 0) fprintf(f, " %.3f ms", t.recompute_s * 1e3);
        fprintf(f, "; step %.3f ms, %.1f samples/s (batch %d)\n", t.step_s * 1e3, t.samples_per_s, t.batch);
        MeLlmRate rate;
        if (me_llm_tokens(m->model, &m->gpu, t.step_s, &rate)) {
            fprintf(f, "  tokens: %.1f/s (%lld tokens a step)", rate.tokens_per_s, (long long)rate.step_tokens);
            if (rate.decode_bound_tokens_per_s > 0)
                fprintf(f, "; decode bound by bandwidth (weights + KV cache read once a token): %.1f/s", rate.decode_bound_tokens_per_s);
            fprintf(f, "\n");
        }
    }
    if (m->has_max_batch) {
        const MemestMaxBatch *b = &m->max_batch;
        if (b->batch > 0)
            fprintf(f, "  largest batch that fits: %lld (needs %.2f MiB; %lld needs %.2f MiB), from %d timelines\n",
                    (long long)b->batch, mib(b->needed), (long long)b->batch + 1, mib(b->needed_next), b->simulations);
        else
            fprintf(f, "  largest batch that fits: none (batch 1 needs %.2f MiB)\n", mib(b->needed_next));
    }
    if (m->has_max_seq) {
        const MemestMaxSeq *q = &m->max_seq;
        if (q->seq > 0 && q->needed_next)
            fprintf(f, "  longest prompt that fits: %lld tokens (needs %.2f MiB; %lld needs %.2f MiB), from %d timelines\n",
                    (long long)q->seq, mib(q->needed), (long long)q->seq + 1, mib(q->needed_next), q->simulations);
        else if (q->seq > 0)
            fprintf(f, "  longest prompt that fits: %lld tokens, the model's whole context (needs %.2f MiB), from %d timelines\n",
                    (long long)q->seq, mib(q->needed), q->simulations);
        else
            fprintf(f, "  longest prompt that fits: none (1 token needs %.2f MiB)\n", mib(q->needed_next));
    }
    if (m->has_concurrency) {
        const MemestConcurrency *c = &m->concurrency;
        const MemestConcurrencySettings *s = &c->settings;
        fprintf(f, "  vLLM-style concurrency, sequences of %lld tokens (paged cache, blocks of %lld tokens, %llu bytes a block):\n",
                (long long)s->len, (long long)c->block_tokens, (unsigned long long)c->block_bytes);
        fprintf(f, "    budget %.2f x memory = %.2f MiB; weights %.2f MiB, activation peak of the profile run (%lld sequences x %lld tokens) "
                   "%.2f MiB, CUDA context %.2f MiB\n",
                s->gpu_memory_utilization, mib(c->budget), mib(c->weights), (long long)c->profile_seqs, (long long)c->profile_tokens,
                mib(c->activation_peak), mib(c->context));
        fprintf(f, "    KV blocks: %lld, %lld a sequence; concurrent sequences: %lld%s\n", (long long)c->blocks, (long long)c->blocks_per_seq,
                (long long)c->seqs, c->capped ? " (max_num_seqs caps it; the blocks hold more)" : "");
        if (c->capped)
            fprintf(f, "    decode step of %lld sequences needs %.2f MiB (%s the budget)\n", (long long)c->seqs, mib(c->needed),
                    c->needed <= c->budget ? "fits" : "does NOT fit");
        else
            fprintf(f, "    decode step of %lld sequences needs %.2f MiB, of %lld %.2f MiB: %s\n", (long long)c->seqs, mib(c->needed),
                    (long long)c->seqs + 1, mib(c->needed_next), c->confirmed ? "confirmed" : "NOT confirmed by the timelines");
        double tps = me_concurrency_decode_bound(c, m->gpu.bandwidth);
        if (tps > 0)
            fprintf(f, "    decode bound by bandwidth at %lld sequences (weights + their caches read once a step): %.1f tokens/s\n",
                    (long long)c->seqs, tps);
    }
    if (m->has_plan) {
        const MemestPlan *p = &m->plan;
        fprintf(f, "  training plans on %d x %s (links %.0f GB/s one way), %d micro-batches of %lld x %lld tokens a step: %d rows, "
                   "%d timelines (one a row, one a pipeline stage); %d fit\n", p->gpus, p->gpu.name, p->gpu.link_bandwidth / 1e9,
                p->micro_batches, (long long)p->micro_batch, (long long)p->seq, p->n_rows, p->simulations, p->n_fit);
        if (p->fewest)
            fprintf(f, "    %s\n", p->n_fit ? "the fewest GPUs for which a plan fits (1 to 8, then whole nodes of 8)"
                                            : "no plan fits on up to 4096 GPUs");
        if (p->skipped[0]) fprintf(f, "    not planned: %s\n", p->skipped);
        const MemestPlanRow *least = NULL;
        for (int i = 0; i < p->n_rows; i++)
            if (!least || p->rows[i].needed < least->needed) least = &p->rows[i];
        if (p->n_pareto) {
            fprintf(f, "    Pareto set (no other plan that fits needs less memory and trains more tokens/s):\n");
            fprintf(f, "    %3s %3s %3s %3s %4s %-10s %-7s %12s %9s %9s %9s %9s %11s  %s\n", "tp", "sp", "pp", "dp", "zero", "checkpoint",
                    "offload", "need(MiB)", "step(s)", "compute", "tp+pp", "dp comm", "tokens/s", "memest options");
            for (int i = 0; i < p->n_rows; i++) {
                const MemestPlanRow *r = &p->rows[i];
                if (!r->pareto) continue;
                char a[160], b[256];
                me_plan_flags(r, a, sizeof(a), b, sizeof(b));
                fprintf(f, "    %3d %3s %3d %3d %4d %-10s %-7s %12.2f %9.3f %9.3f %9.3f %9.3f %11.0f  %s\n", r->tp, r->sp ? "on" : "-", r->pp,
                        r->dp, r->dp > 1 ? r->shard : 0, me_plan_ckpt_name(r->checkpoint), r->offload ? "optim" : "-", mib(r->needed),
                        r->step_s, r->compute_s, r->tp_comm_s + r->pp_comm_s, r->dp_comm_s, r->tokens_per_s, a);
            }
        } else if (least) {
            char a[160], b[256];
            me_plan_flags(least, a, sizeof(a), b, sizeof(b));
            fprintf(f, "    none fits: the least memory is %.2f MiB a GPU (%s), over the GPU's %.2f MiB\n", mib(least->needed), a,
                    mib(p->gpu.memory));
        }
        fprintf(f, "    step time: the rank's roofline plus the collectives at the link bandwidth, not overlapped (doc/memory.md, "
                   "\"Plans\"); with offload the host's optimizer step is not in it; every plan in the JSON report (device.plan.rows)\n");
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
    totals_cells(m, fwd, &tot, ts);
    for (int i = 0; i < nc; i++) {
        int l = (int)strlen(tot.c[i]);
        if (l > w[i]) w[i] = l;
    }
    print_answer(m, f);
    if (ts) fprintf(f, "(torchstat's own columns: memory(MB) and the totals' MB are torchstat's MB, 2^20 bytes)\n");
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
    uint64_t kv_tok, kv_n, kv_b;
    if (me_llm_kv(m->model, &kv_tok, &kv_n, &kv_b)) {
        thousands(kv_b, a, sizeof(a));
        fprintf(f, "KV cache: %llu bytes per token, %s bytes for %llu tokens (%.2f MiB)\n", (unsigned long long)kv_tok, a,
                (unsigned long long)kv_n, (double)kv_b / (1024.0 * 1024.0));
        uint64_t nb, bt, bb;
        if (me_llm_kv_blocks(m->model, &nb, &bt, &bb))
            fprintf(f, "  paged: %llu blocks of %llu tokens, %llu bytes a block (every layer's keys and values)\n",
                    (unsigned long long)nb, (unsigned long long)bt, (unsigned long long)bb);
    }
    thousands(t->macs, a, sizeof(a));
    scaled((double)t->macs, b, sizeof(b), "");
    fprintf(f, "Total MACs: %s (%s)\n", a, b);
    thousands(t->flops, a, sizeof(a));
    scaled((double)t->flops, b, sizeof(b), "");
    fprintf(f, "Total FLOPs: %s (%s)\n", a, b);
    fprintf(f, "Total memory (sum of layer outputs): %.2f MiB\n", (double)t->output_bytes / (1024.0 * 1024.0));
    fprintf(f, "Total MemR+W: %.2f MiB\n", (double)me_sadd(t->mem_read, t->mem_write) / (1024.0 * 1024.0));
    fprintf(f, "Seed view (every layer output summed, in-place layers skipped): %.4f MB forward, %.4f MB with backward (x2) (MB = 10^6 bytes, the seed documents' unit)\n",
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
    if (!strpbrk(s, ",\"\n\r")) { puts_line(l, s); return; }
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
    /* names from the model file: control characters would break the row
     * (a newline) or reach the terminal of whoever views it (ESC) */
    char *esc = NULL;
    if (me_needs_escape(s)) {
        size_t n = strlen(s);
        esc = n < SIZE_MAX / 4 ? me_malloc(4 * n + 1) : NULL;
        if (!esc) { l->failed = true; return; }
        s = me_escape(s, esc, 4 * n + 1);
    }
    for (const char *t; (t = strchr(s, '|')); s = t + 1) {
        put(l, s, (size_t)(t - s));
        put(l, "\\|", 2);
    }
    puts_line(l, s);
    put(l, " ", 1);
    me_free(esc);
}

/* The answer beyond the rows, as (section, field, value, unit) facts:
 * what the table prints after its rows, for the formats that are tables of
 * rows (CSV, Markdown). Units: bytes, count, s, 1/s, B/s, FLOP/s or empty
 * for text. doc/report-schema.md lists the fields. */
typedef struct Facts {
    Line *l;
    bool markdown;
} Facts;

static void fact(Facts *x, const char *section, const char *field, const char *value, const char *unit)
{
    const char *cells[4] = { section, field, value, unit };
    for (int i = 0; i < 4; i++) {
        if (x->markdown) {
            md_field(x->l, cells[i]);
        } else {
            if (i) put(x->l, ",", 1);
            csv_field(x->l, cells[i]);
        }
    }
    puts_line(x->l, x->markdown ? "|\n" : "\n");
}

static void fact_u64(Facts *x, const char *section, const char *field, uint64_t v, const char *unit)
{
    char buf[24];
    me_u64_str(v, buf);
    fact(x, section, field, buf, unit);
}

static void fact_num(Facts *x, const char *section, const char *field, double v, const char *unit)
{
    char buf[48];
    snprintf(buf, sizeof(buf), "%.6g", v);
    fact(x, section, field, buf, unit);
}

static void facts(const MemestAnalysis *m, Facts *x)
{
    const MemestTotals *t = &m->totals;
    bool ts = m->conv == MEMEST_CONVENTION_TORCHSTAT;
    fact(x, "totals", "convention", memest_convention_name(m->conv), "");
    fact_u64(x, "totals", "batch", m->g->n_inputs && m->g->v[m->g->inputs[0]].shape.rank ? (uint64_t)m->g->v[m->g->inputs[0]].shape.d[0] : 1, "count");
    fact_u64(x, "totals", "params", t->params, "count");
    fact_u64(x, "totals", "param_bytes", t->param_bytes, "bytes");
    fact_u64(x, "totals", "buffers", t->buffers, "count");
    fact_u64(x, "totals", ts ? "madd" : "macs", t->macs, "count");
    fact_u64(x, "totals", "flops", t->flops, "count");
    fact_u64(x, "totals", "mem_read", t->mem_read, "bytes");
    fact_u64(x, "totals", "mem_write", t->mem_write, "bytes");
    fact_u64(x, "totals", "mem_rw", me_sadd(t->mem_read, t->mem_write), "bytes");
    fact_u64(x, "totals", "output_bytes", t->output_bytes, "bytes");
    fact_u64(x, "totals", "seed_sum_bytes", t->seed_sum_bytes, "bytes");
    fact_u64(x, "totals", "nodes", (uint64_t)t->nodes, "count");
    const char *ops[256];
    int counts[256];
    int k = me_op_counts(m, ME_COST_UNKNOWN_OP, ops, counts, 256);
    for (int i = 0; i < k; i++) fact_u64(x, "unknown_ops", ops[i], (uint64_t)counts[i], "count");
    k = me_op_counts(m, ME_COST_UNCOUNTED, ops, counts, 256);
    for (int i = 0; i < k; i++) fact_u64(x, "uncounted_ops", ops[i], (uint64_t)counts[i], "count");
    for (int i = 0; i < m->g->nv; i++) {
        const MeValue *v = &m->g->v[i];
        int64_t n = me_shape_numel(&v->shape);
        if (v->from_constant && v->n_uses)
            fact_u64(x, v->role == ME_R_BUFFER ? "constant_buffers" : "constant_weights", v->name, n > 0 ? (uint64_t)n : 0, "count");
    }
    const char *text, *code;
    for (int i = 0; (text = memest_note_text(m, i, &code)); i++) fact(x, "notes", code, text, "");
    if (m->has_memory) {
        const MemestMemorySettings *ms = &m->memory.settings;
        fact(x, "memory", "mode", me_mode_key(ms->mode), "");
        fact(x, "memory", "module_mode", me_module_mode(ms), "");
        if (ms->mode == MEMEST_RUN_TRAIN) {
            fact(x, "memory", "optimizer", me_optimizer_name(ms->optimizer), "");
            fact(x, "memory", "loss", memest_loss_name(ms->loss), "");
        }
        fact(x, "memory", "runtime", ms->runtime == MEMEST_RUNTIME_CPU ? "cpu" : "cuda", "");
        fact(x, "memory", "autocast", me_autocast_key(ms->amp), "");
        char pg[64];
        if (per_gpu(m, pg, sizeof(pg))) fact(x, "memory", "per_gpu", pg, "");
        if (!m->memory.n_mem) fact(x, "memory", "skipped", m->memory.skipped, "");
        if (m->memory.assumed[0]) fact(x, "memory", "assumed", m->memory.assumed, "");
        for (int s = 0; s < m->memory.n_mem; s++) {
            const MemestMemory *r = &m->memory.mem[s];
            char sec[48], sec2[64];
            snprintf(sec, sizeof(sec), "memory.step%d", s + 1);
            snprintf(sec2, sizeof(sec2), "memory.step%d.at_peak", s + 1);
            fact_u64(x, sec, "peak", r->peak_allocated, "bytes");
            fact_u64(x, sec, "peak_requested", r->peak, "bytes");
            if (ms->runtime == MEMEST_RUNTIME_CUDA) {
                fact_u64(x, sec, "peak_reserved", r->peak_reserved, "bytes");
                fact_u64(x, sec, "cuda_context_estimate", r->cuda_context, "bytes");
                fact_u64(x, sec, "nvidia_smi", r->nvidia_smi, "bytes");
            }
            fact_u64(x, sec, "baseline", r->baseline, "bytes");
            fact_u64(x, sec, "end", r->end, "bytes");
            fact(x, sec, "peak_at", r->peak_name ? r->peak_name : "", "");
            fact(x, sec, "peak_phase", me_phase_name(r->peak_phase), "");
            fact_u64(x, sec, "checkpoint_segments", (uint64_t)r->segments, "count");
            fact_u64(x, sec, "recompute_macs", r->recompute_macs, "count");
            if (ms->offload) fact_u64(x, sec, "host", r->host, "bytes"); /* ZeRO-Offload: never on the GPU */
            for (int c = 0; c < MEMEST_MEM_COUNT; c++)
                if (c != MEMEST_MEM_OPTIMIZER_PAGED || me_optimizer_paged(ms->optimizer))
                    fact_u64(x, sec2, memest_mem_category_name((MemestMemCategory)c), r->at_peak[c], "bytes");
        }
        if (m->has_pipeline) { /* --pp: the steps above are the worst stage's one micro-batch */
            const MemestPipeline *p = &m->pipeline;
            fact_u64(x, "memory.pipeline", "stages", (uint64_t)p->stages, "count");
            fact_u64(x, "memory.pipeline", "micro_batches", (uint64_t)p->micro_batches, "count");
            fact_u64(x, "memory.pipeline", "worst_stage", (uint64_t)p->worst, "index");
            for (int s = 0; s < p->stages; s++) {
                char sec[48];
                snprintf(sec, sizeof(sec), "memory.pipeline.stage%d", s);
                fact_u64(x, sec, "in_flight", (uint64_t)p->stage[s].in_flight, "count");
                fact_u64(x, sec, "weights", p->stage[s].weights, "bytes");
                fact_u64(x, sec, "needed", p->stage[s].needed, "bytes");
            }
        }
    }
    if (!m->has_gpu) return;
    const MemestGpu *g = &m->gpu;
    fact(x, "device", "gpu", g->name, "");
    fact_u64(x, "device", "memory", g->memory, "bytes");
    if (m->has_memory && m->memory.n_mem) {
        uint64_t need = memest_memory_needed(m);
        fact_u64(x, "device", "needed", need, "bytes");
        fact(x, "device", "needed_is", needed_what(m), "");
        fact(x, "device", "fits", need <= g->memory ? "yes" : "no", "");
        fact_u64(x, "device", need <= g->memory ? "headroom" : "short_by", need <= g->memory ? g->memory - need : need - g->memory, "bytes");
    }
    const char *no_roof = me_roofline_missing(m);
    MemestTiming tm;
    if (no_roof) {
        fact(x, "device", "roofline_skipped", no_roof, "");
    } else if (memest_timing(m, &tm) == 0) {
        fact_num(x, "device", "bandwidth", g->bandwidth, "B/s");
        fact_num(x, "device", "fp32_flops", g->fp32_flops, "FLOP/s");
        fact_num(x, "device", "fp16_flops", g->fp16_flops, "FLOP/s");
        fact_num(x, "device", "roofline.forward", tm.forward_s, "s");
        fact_num(x, "device", "roofline.backward", tm.backward_s, "s");
        fact_num(x, "device", "roofline.recompute", tm.recompute_s, "s");
        fact_num(x, "device", "roofline.optimizer", tm.optimizer_s, "s");
        fact_num(x, "device", "roofline.step", tm.step_s, "s");
        fact_num(x, "device", "samples_per_second", tm.samples_per_s, "1/s");
    }
    if (m->has_max_batch) {
        fact_u64(x, "device", "max_batch", m->max_batch.batch > 0 ? (uint64_t)m->max_batch.batch : 0, "count");
        fact_u64(x, "device", "max_batch.needed", m->max_batch.needed, "bytes");
        fact_u64(x, "device", "max_batch.needed_next", m->max_batch.needed_next, "bytes");
    }
}

static int report_csv(const MemestAnalysis *m, FILE *f, bool markdown)
{
    static const char *const cols[] = { "module", "type", "input_shape", "output_shape", "params", "output_bytes",
        "macs", "flops", "mem_read", "mem_write", "mem_rw", "counted" };
    int nc = (int)(sizeof(cols) / sizeof(cols[0]));
    bool ts = m->conv == MEMEST_CONVENTION_TORCHSTAT;
    if (markdown) print_answer(m, f); /* CSV keeps its header first: the summary rows carry the answer */
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
                (unsigned long long)t->macs, (unsigned long long)t->flops, (unsigned long long)me_sadd(t->mem_read, t->mem_write));
    }
    /* the rest of the answer: a second table after a blank line, with its
     * own header, so a reader splits the file at the first empty line */
    Line fl = { 0 };
    Facts x = { &fl, markdown };
    puts_line(&fl, markdown ? "\n**Summary** (totals, memory peak per step with its breakdown, GPU)\n\n| section | field | value | unit |\n|---|---|---:|---|\n"
                            : "\nsection,field,value,unit\n");
    facts(m, &x);
    bool bad = fl.failed || fwrite(fl.p, 1, fl.n, f) != fl.n;
    me_free(fl.p);
    return bad ? ME_ENOMEM : 0;
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
