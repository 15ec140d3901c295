/* The memory timeline: what PyTorch allocates and frees in one step,
 * simulated over the graph in execution order (ggml-alloc's model: count the
 * readers of every tensor, free it when the count reaches zero).
 *
 * Tensors live in storages: a view or an in-place op shares its input's
 * storage. A storage is freed when no node will read it (refs), nothing
 * holds it (holds: graph outputs, tensors autograd saved, gradients shared
 * by several values) and it is not persistent (weights, inputs, .grad,
 * optimizer state).
 *
 * Training: forward keeps what autograd saves (ops/autograd.c); the loss;
 * backward in reverse creates each input's gradient, releases the node's
 * saved tensors and its outputs' gradients; parameter gradients stay as
 * .grad; the optimizer creates its state at step 1; zero_grad(set_to_none)
 * and the end of the step free the rest. Runtime profiles add what one
 * backend allocates inside ops (doc/memory.md). */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "optim.h"
#include "timeline.h"

typedef struct Storage {
    int64_t bytes;
    int refs;        /* node reads still to come */
    int holds;       /* other owners: graph output, saved, gradient links */
    uint8_t cat;     /* MemestMemCategory */
    bool alive, persistent;
} Storage;

/* What the loops of a forward show: `for blk in self.h: x = blk(x)`
 * iterates a ModuleList (an uncalled scope) in its parent's frame. */
typedef struct Loops {
    const int *last; /* scope -> last position of its ops and its children's */
    int *first;      /* scope -> first such position, -1 for none */
    int *exit;       /* uncalled scope -> its one element whose values are read outside it, -1 none, -2 several */
    int *next;       /* element (child of an uncalled scope) -> first position of the element run after it, -1 none */
} Loops;

/* The frame that keeps a value made inside a loop bound until it returns,
 * or -2 (CPython frees a frame's names and the containers they hold when
 * it returns). Reader at position oi in scope to, c = common(from, to),
 * u the outermost uncalled scope below c on the producer's side and e its
 * element that made the value; c must be the frame iterating u.
 * - The loop's result: `for blk in self.h: x = blk(x)` then
 *   `self.ln_f(x)`: x still holds the last block's output after the loop.
 *   The reader runs after u's last op and in no loop body below c, and
 *   only e's values leave u (a body that reads every element's output,
 *   `x = dec(torch.cat([up(x), skip]))`, makes a temporary of the last
 *   one too).
 * - A value kept across iterations: read after the next element of u has
 *   run (the UNet's `skips.append(h)` read by a later `torch.cat`), so the
 *   frame stored it, in a name the loop does not re-bind or a container.
 * A re-binding or `del` would free either sooner; no export shows one
 * (the language-model builder states HF's names itself: not for its
 * lists). -1: the outermost frame. */
static int loop_frame(const MeGraph *g, const Loops *lp, int from, int to, int c, int oi)
{
    int u = -1, e = -1;
    for (int s = from; s >= 0 && s != c; s = g->scopes[s].parent) {
        int q = g->scopes[s].parent;
        if (q >= 0 && q != c && g->scopes[q].uncalled) {
            u = q; /* the outermost */
            e = s;
        }
    }
    if (u < 0 || !g->scopes[u].unseen_names) return -2; /* a builder that states the frame's names */
    int p = g->scopes[u].parent;
    while (p >= 0 && p != c && g->scopes[p].uncalled) p = g->scopes[p].parent;
    if (p != c) return -2;
    if (lp->next[e] >= 0 && lp->next[e] < oi) return c;
    for (int s = to; s >= 0 && s != c; s = g->scopes[s].parent)
        if (g->scopes[s].uncalled) return -2;
    return lp->last[u] < oi && lp->exit[u] >= 0 ? c : -2;
}

/* (list, first position, element) triples by list, then position */
static int by_parent_first(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* Loops.first, exit and next (last is filled). */
static int loop_info(const MeGraph *g, Loops *lp)
{
    for (int s = 0; s < g->nscopes; s++) lp->first[s] = lp->exit[s] = lp->next[s] = -1;
    for (int oi = g->nn - 1; oi >= 0; oi--) lp->first[g->n[g->order[oi]].scope] = oi;
    for (int s = g->nscopes - 1; s >= 0; s--) {
        int q = g->scopes[s].parent;
        if (q >= 0 && lp->first[s] >= 0 && (lp->first[q] < 0 || lp->first[s] < lp->first[q])) lp->first[q] = lp->first[s];
    }
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || g->v[v].producer < 0) continue;
            int from = g->n[g->v[v].producer].scope;
            int c = me_scope_common(g, from, n->scope), dc = c >= 0 ? g->scopes[c].depth : -1;
            for (int e = from, u = e >= 0 ? g->scopes[e].parent : -1; u >= 0 && g->scopes[u].depth > dc;
                 e = u, u = g->scopes[u].parent)
                if (g->scopes[u].uncalled) lp->exit[u] = lp->exit[u] == -1 || lp->exit[u] == e ? e : -2;
        }
    }
    /* the elements of each list in the order they ran */
    int ne = 0;
    for (int s = 0; s < g->nscopes; s++)
        ne += g->scopes[s].parent >= 0 && g->scopes[g->scopes[s].parent].uncalled && lp->first[s] >= 0;
    if (!ne) return 0;
    int *el = me_malloc(sizeof(int) * 3 * (size_t)ne);
    if (!el) return ME_ENOMEM;
    int k = 0;
    for (int s = 0; s < g->nscopes; s++)
        if (g->scopes[s].parent >= 0 && g->scopes[g->scopes[s].parent].uncalled && lp->first[s] >= 0) {
            el[3 * k] = g->scopes[s].parent;
            el[3 * k + 1] = lp->first[s];
            el[3 * k + 2] = s;
            k++;
        }
    qsort(el, (size_t)ne, sizeof(int) * 3, by_parent_first);
    for (int i = 0; i + 1 < ne; i++)
        if (el[3 * i] == el[3 * i + 3]) lp->next[el[3 * i + 2]] = el[3 * i + 4];
    me_free(el);
    return 0;
}

static bool own_op(const MeGraph *g, int c, const MeNode *n)
{
    return n->scope == c || (c < 0 && me_node_root_op(n)); /* the root forward's ops have a scope each */
}

/* The use frame c makes of a value node ri reads: the child call ri is in
 * (its scope), or the frame's own op that computes with it (nscopes + its
 * index), found through the views between (torch.stack's unsqueeze before
 * the Concat); INT_MIN for none. One Python op the export writes as
 * several views of one input ends in one op (torch.roll: two Slices and a
 * Concat); t[i] = x's chained ScatterNDs and x.shape's Shape are none. */
static int frame_use(const MeGraph *g, const int *reader, int c, int ri)
{
    const MeNode *n = &g->n[ri];
    if (!own_op(g, c, n)) {
        int u = n->scope;
        while (g->scopes[u].parent != c) u = g->scopes[u].parent;
        return u;
    }
    for (int hops = 0; hops < 16; hops++) {
        n = &g->n[ri];
        if (!n->desc || (n->desc->flags & ME_OPF_CONSTANT) || n->desc->cls == ME_C_SHAPE || n->desc->autograd == ME_AG_INDEX)
            return INT_MIN;
        if (!me_node_is_view(n)) return g->nscopes + ri;
        int y = n->n_out ? n->out[0] : -1;
        if (y < 0 || g->v[y].n_uses != 1 || g->v[y].is_output || reader[y] < 0 || !own_op(g, c, &g->n[reader[y]]))
            return INT_MIN;
        ri = reader[y];
    }
    return INT_MIN;
}

/* A value that one frame reads twice (two of its own ops, one and a
 * child's call, or two calls) was bound to a name there: Python has no
 * other way to use one result twice, and the name keeps it until the frame
 * returns (PoolFormer's `y = self.norm1(x)` read by `self.pool(y) - y`;
 * Whisper's `h = self.self_attn_layer_norm(x)` read by q, k and v_proj).
 * Two ops inside one child call are one use, the pieces of one chunk (one
 * Split) too, and the frame's own ops count only where they compute
 * (frame_use). For a graph that does not state its names (an export);
 * last: each scope's last position. */
static int twice_read(const MeGraph *g, const int *last, int *hold_end)
{
    int *fc = me_malloc(sizeof(int) * 3 * (size_t)(g->nv + 1)), *fu = fc ? fc + g->nv + 1 : NULL,
        *reader = fc ? fu + g->nv + 1 : NULL; /* a value's reader, the one where it has one */
    /* loops: 1 + scope, [0] the root forward; works: a scope with an op that
     * computes (not only a Constant's or an Identity's) */
    bool *loops = me_calloc(2 * ((size_t)g->nscopes + 1), sizeof(bool)), *works = loops ? loops + g->nscopes + 1 : NULL;
    if (!fc || !loops) {
        me_free(fc);
        me_free(loops);
        return ME_ENOMEM;
    }
    for (int v = 0; v < g->nv; v++) fc[v] = fu[v] = INT_MIN, reader[v] = -1;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) reader[n->in[k]] = i;
        if (n->scope >= 0 && n->desc && !(n->desc->flags & ME_OPF_CONSTANT) && n->desc->cls != ME_C_VIEW &&
            n->desc->cls != ME_C_SHAPE)
            works[n->scope] = true;
    }
    /* A frame that iterates a ModuleList or calls a child again may run a
     * loop, whose names are bound again each time round (WaveNet's
     * `x = res(z) + x`, a ConvLSTM's `c = f * c + ...`): its values are
     * not taken as kept */
    for (int sc = 0; sc < g->nscopes; sc++) {
        int k, p = g->scopes[sc].parent;
        if (g->scopes[sc].name[0] == '/') continue; /* the root forward's own op ("/Add_1") */
        me_call_base(g->scopes[sc].name, &k);
        if (g->scopes[sc].uncalled || (k != 0 && works[sc])) loops[p + 1] = true;
    }
    for (int oi = 0; oi < g->nn; oi++) {
        int ri = g->order[oi];
        const MeNode *n = &g->n[ri];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k], p = v >= 0 ? g->v[v].producer : -1;
            /* a name known to be bound again (canon/fpn.c) is not kept */
            if (p < 0 || g->v[v].kind != ME_V_ACT || g->v[v].rebound_by) continue;
            int c = me_scope_common(g, g->n[p].scope, n->scope), u;
            /* a loop's frame, or a forward whose names memest knows
             * (nn.TransformerEncoderLayer's binds x again: canon/mha.c) */
            if (loops[c + 1] ||
                (c >= 0 && (g->scopes[c].uncalled || g->scopes[c].unnamed_temps || g->scopes[c].torch_mha)))
                continue;
            if (n->flags & ME_N_SPLIT_PIECE) u = -1;
            else if ((u = frame_use(g, reader, c, ri)) == INT_MIN) continue;
            if (fc[v] == INT_MIN) {
                fc[v] = c;
                fu[v] = u;
            } else if (fc[v] == c && fu[v] != u) {
                int e = c >= 0 ? last[c] : g->nn - 1;
                if (e > hold_end[v]) hold_end[v] = e;
            }
        }
    }
    me_free(fc);
    me_free(loops);
    return 0;
}

/* Python keeps a module's arguments alive until the call returns: in
 * `x = self.layer1(x)` the caller's x stays bound while layer1 runs, however
 * early its last reader inside. A value read inside module scope A (the
 * reader's scope or an ancestor) but made outside A is held until A's last
 * op. hold_end[v] is that op's position in the order, -1 for none. Scope
 * ids, not strings: linear in nodes times scope depth. */
int me_scope_holds(const MeGraph *g, int *hold_end, int *frame_end)
{
    if (me_graph_scopes((MeGraph *)g) < 0) return ME_ENOMEM;
    /* last position of every scope: of its own ops, then of its children's */
    int *last = me_malloc(sizeof(int) * 4 * (size_t)(g->nscopes + 1));
    if (!last) return ME_ENOMEM;
    Loops lp = { .last = last, .first = last + g->nscopes + 1, .exit = last + 2 * (g->nscopes + 1),
                 .next = last + 3 * (g->nscopes + 1) };
    for (int s = 0; s < g->nscopes; s++) last[s] = -1;
    for (int oi = 0; oi < g->nn; oi++) last[g->n[g->order[oi]].scope] = oi;
    for (int s = g->nscopes - 1; s >= 0; s--) {
        int p = g->scopes[s].parent;
        if (p >= 0 && last[s] > last[p]) last[p] = last[s];
    }
    if (loop_info(g, &lp) < 0) {
        me_free(last);
        return ME_ENOMEM;
    }
    for (int i = 0; i < g->nv; i++) hold_end[i] = -1;
    for (int i = 0; frame_end && i < g->nv; i++) frame_end[i] = -1;
    /* a name bound in the forward (HF attention's query_states,
     * key_states, attn_weights) keeps its tensor until the frame ends: the
     * frame that made it, or the one that passes it on to its readers when
     * a child module made it (attention_probs = self.dropout(...)) */
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].local && g->v[i].producer >= 0) {
            const MeNode *p = &g->n[g->v[i].producer];
            hold_end[i] = me_node_root_op(p) ? g->nn - 1 : last[p->scope]; /* the root forward returns at the end */
        }
    /* a loop's name (torchvision's FPN: inner_lateral) keeps each value
     * until the next iteration assigns it again */
    int *pos = NULL;
    for (int i = 0; i < g->nv; i++) {
        int nx = g->v[i].rebound_by - 1, r = nx >= 0 && nx < g->nv ? g->v[nx].producer : -1;
        if (r < 0) continue;
        if (!pos) {
            if (!(pos = me_malloc(sizeof(int) * (size_t)g->nn))) {
                me_free(last);
                return ME_ENOMEM;
            }
            for (int oi = 0; oi < g->nn; oi++) pos[g->order[oi]] = oi;
        }
        if (pos[r] > hold_end[i]) hold_end[i] = pos[r];
    }
    me_free(pos);
    for (int oi = 0; oi < g->nn; oi++) {
        const MeNode *n = &g->n[g->order[oi]];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || g->v[v].producer < 0) continue;
            int from = g->n[g->v[v].producer].scope, to = n->scope;
            int c = me_scope_common(g, from, to), a;
            /* a local the root forward passes on (c < 0) is held until it returns, at the end */
            if (g->v[v].local && (c >= 0 ? last[c] : g->nn - 1) > hold_end[v]) hold_end[v] = c >= 0 ? last[c] : g->nn - 1;
            /* The bound for a graph that does not state its frames' names:
             * every tensor bound to a name in the frame that passes it to
             * its reader (c, the innermost scope holding both), alive until
             * that frame returns. A frame holds nothing past its return, and
             * a tensor reaches a reader only through the frames from its
             * producer's up to c, which all return by c's last op; so no
             * name keeps it longer (module attributes and hooks aside). */
            if (frame_end) {
                int e = c >= 0 ? last[c] : g->nn - 1;
                if (e > frame_end[v]) frame_end[v] = e;
            }
            int lf = loop_frame(g, &lp, from, to, c, oi);
            if (lf != -2) {
                int e = lf >= 0 ? last[lf] : g->nn - 1;
                if (e > hold_end[v]) hold_end[v] = e;
            }
            if (c == to) continue; /* read in the producer's scope or an enclosing one */
            if (c == from) {
                /* made by a functional op in a container's own forward and read
                 * by one of its children: a named local there, alive until the
                 * container returns (densenet's concated_features), unless the
                 * module's forward is known to pass it on unnamed, or its
                 * name to be assigned again before (rebound_by) */
                if (g->scopes[from].unnamed_temps || g->v[v].rebound_by) continue;
                a = from;
            } else {
                /* outermost scope of the reader that does not contain the producer */
                int depth = c >= 0 ? g->scopes[c].depth + 1 : 0;
                for (a = to; g->scopes[a].depth > depth; a = g->scopes[a].parent) {}
                /* `for layer in self.layers: h = layer(h)`: the ModuleList is
                 * not called; the layer is, and its call holds h */
                if (g->scopes[a].uncalled && a != to)
                    for (a = to; g->scopes[a].depth > depth + 1; a = g->scopes[a].parent) {}
            }
            if (last[a] > hold_end[v]) hold_end[v] = last[a];
        }
    }
    int rc = g->frames_unseen ? twice_read(g, last, hold_end) : 0;
    for (int i = 0; frame_end && i < g->nv; i++)
        if (hold_end[i] > frame_end[i]) frame_end[i] = hold_end[i];
    me_free(last);
    return rc;
}

/* The simulation's state, by concern. What is counted from the events
 * (live bytes, peaks, series, the allocator) is in the sinks, not here. */

typedef struct ScopeHolds {
    const int *hold_end; /* value → position until which its scope holds it */
    int *hold_head;   /* position → first value whose hold ends there */
    int *hold_next;
} ScopeHolds;

typedef struct Checkpointing {
    int *seg;         /* node → checkpointed segment, -1 none */
    int nseg;
    int *seg_last;    /* segment → its last node's position in the order */
    int *seg_first;
    bool *seg_redone; /* segment recomputed in this backward */
    int **seg_held;   /* segment → storages held for its backward */
    int *n_seg_held;
    int *own_uses;    /* value → readers inside its producer's segment */
    int *ext_uses;    /* value → readers outside it that run (a Shape of
                       * it reads no data and is in no segment) */
} Checkpointing;

typedef struct Layout {
    int *stride_at;   /* value → its row in strides, -1: contiguous (from its shape) */
    int64_t (*strides)[ME_MAX_RANK]; /* element strides of the values that are not contiguous */
    int nstrides, cap_strides;
    int mm_copy[2];   /* storages a batched matmul copied its operands into, -1 none */
} Layout;

typedef struct Autocast {
    uint8_t *es;      /* value → bytes per element here (autocast changes them) */
    int *wcache;      /* weight → its autocast copy's storage, -1 none */
    int cast[8];      /* storages autocast copied this node's inputs into, -1 none */
} Autocast;

typedef struct DataParallel {
    int ranks;        /* ranks sharing model states (1: none) */
    int shard;        /* MemestShard */
    int offload;      /* MemestOffload */
} DataParallel;

typedef struct Saved {
    int *saved_head;  /* node → first link of the storages it keeps for backward, -1 none */
    int *saved_tail;
    struct SavedLink { int id, next; } *links; /* one pool for every node's list */
    int nlinks, cap_links;
} Saved;

typedef struct Sim {
    MeGraph *g;
    const MemestMemorySettings *s;
    Storage *st;
    int nst, cap;
    int *vst;         /* value → storage, -1 none */
    int *vgrad;       /* value → gradient storage, -1 none */
    int64_t *grows;   /* value → its gradient is a strided view of this many rows (grad_strided), 0 contiguous */
    bool *rg;         /* value requires grad */
    ScopeHolds hold;
    Checkpointing ckpt;
    Layout layout;
    Autocast amp;
    DataParallel dp;
    Saved saved;
    /* a running node's input gradients that meet an earlier one: summed
     * once the node's backward has returned (give_grad) */
    struct PendingSum { int value, storage, through; } *pend;
    /* chunks written as Slices (ME_N_SPLIT_PIECE), by the chunked value:
     * pieces whose backward has not run, and the pieces' gradients held
     * until SplitBackward0 cats them (a list through split_next) */
    int *split_left, *split_head, *split_next;
    int npend, cap_pend;
    /* nn.TransformerEncoderLayer calls run as one op (plan_fused) */
    struct Fused { int out; int64_t transient; bool started; } *fz;
    int *fz_of;       /* node -> its fused layer, -1 none; NULL: no layer is fused */
    MemestMemory *out;
    int node;
    MemestPhase phase;
    bool grad;        /* autograd records the forward */
    bool sdpa;        /* --torch 2: nn.MultiheadAttention's attention is one SDPA call (attn_core, attn_ctx) */
    bool cuda;        /* the CUDA runtime: caching allocator, cuBLAS workspace */
    MeTlSink sinks[3]; /* who hears the events (timeline.h) */
    int nsinks;
    unsigned heard;   /* kinds some sink hears: the others are not even made */
    bool workspace;   /* cuBLAS workspace made (the forward's thread) */
    bool bwd_workspace; /* ... and the autograd engine's device thread's */
    bool failed;
    /* Bytes alive now, kept below ME_SIM_MAX_BYTES: every sum a sink makes
     * (totals, per category, a note's extra on top) then fits in int64.
     * A model past it (a ConstantOfShape of 2^62 elements) is an error
     * naming the node, never a wrapped figure. */
    int64_t live;
    bool too_big;
    int too_big_node;
    MemestPhase too_big_phase;
} Sim;

#define ME_SIM_MAX_BYTES (INT64_C(1) << 60) /* 1 EiB: no device holds a thousandth of it */

/* Byte counts are non-negative: a sum or product past int64 saturates at
 * INT64_MAX, which the check in st_make/note_open then reports. */
static int64_t sat_add(int64_t a, int64_t b) { int64_t r; return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r; }
static int64_t sat_mul(int64_t a, int64_t b) { int64_t r; return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r; }

static const char *const cat_names[MEMEST_MEM_COUNT] = {
    "weights", "inputs", "activations", "saved", "gradients", "activation_grads", "optimizer", "temporary", "workspace",
    "autocast_cache", "optimizer_paged",
};

const char *memest_mem_category_name(MemestMemCategory c) { return me_name_of(cat_names, MEMEST_MEM_COUNT, (int)c); }

/* a scalar output is the loss itself: backward() on it, no loss op */
enum { LOSS_IS_OUTPUT = MEMEST_LOSS_COUNT };

static const char *const loss_names[MEMEST_LOSS_COUNT] = {
    [MEMEST_LOSS_CROSS_ENTROPY] = "cross-entropy", [MEMEST_LOSS_MSE] = "mse", [MEMEST_LOSS_MEAN] = "mean",
    [MEMEST_LOSS_SUM] = "sum", [MEMEST_LOSS_NONE] = "none", [MEMEST_LOSS_POW2_MEAN] = "pow2-mean",
};

const char *memest_loss_name(MemestLoss l) { return me_name_of(loss_names, MEMEST_LOSS_COUNT, (int)l); }
int memest_loss_from_name(const char *name) { return me_name_index(loss_names, MEMEST_LOSS_COUNT, name); }

/* --- the event stream (timeline.h) --- */

static void emit(Sim *m, MeTlEvent *e)
{
    e->phase = (uint8_t)m->phase;
    e->node = m->node;
    for (int k = 0; k < m->nsinks; k++)
        if ((m->sinks[k].kinds & ME_TL_BIT(e->kind)) && m->sinks[k].event(m->sinks[k].opaque, e) < 0) m->failed = true;
}

static bool heard(const Sim *m, MeTlKind kind) { return (m->heard & ME_TL_BIT(kind)) != 0; }

/* Whether bytes more stay below ME_SIM_MAX_BYTES; if not, the first such
 * node is noted and the run fails. */
static bool fits(Sim *m, int64_t bytes)
{
    if (bytes >= 0 && bytes <= ME_SIM_MAX_BYTES - m->live) return true;
    if (!m->too_big) {
        m->too_big = true;
        m->too_big_node = m->node;
        m->too_big_phase = m->phase;
    }
    m->failed = true;
    return false;
}

/* A storage made for value (its gradient when grad), -1 none. */
static int st_make(Sim *m, int64_t bytes, MemestMemCategory cat, int value, bool grad)
{
    if (!fits(m, bytes)) bytes = 0; /* the run is abandoned: failed is set */
    m->live += bytes;
    if (me_grow_raw(&m->st, &m->cap, m->nst + 1, sizeof(Storage)) < 0) {
        m->failed = true;
        return -1;
    }
    Storage *s = &m->st[m->nst];
    memset(s, 0, sizeof(*s));
    s->bytes = bytes;
    s->cat = (uint8_t)cat;
    s->alive = true;
    MeTlEvent e = me_tl_event(ME_TL_ALLOC);
    e.storage = m->nst;
    e.bytes = bytes;
    e.cat = (uint8_t)cat;
    e.value = value;
    e.grad = grad;
    emit(m, &e);
    return m->nst++;
}

static int st_new(Sim *m, int64_t bytes, MemestMemCategory cat) { return st_make(m, bytes, cat, -1, false); }

static void st_free(Sim *m, int id)
{
    Storage *s = &m->st[id];
    if (!s->alive) return;
    s->alive = false;
    m->live -= s->bytes;
    MeTlEvent e = me_tl_event(ME_TL_FREE);
    e.storage = id;
    e.bytes = s->bytes;
    e.cat = s->cat;
    emit(m, &e);
}

static void st_release(Sim *m, int id)
{
    if (id < 0) return;
    Storage *s = &m->st[id];
    if (s->alive && s->refs <= 0 && s->holds <= 0 && !s->persistent) st_free(m, id);
}

static void st_recat(Sim *m, int id, MemestMemCategory cat)
{
    Storage *s = &m->st[id];
    if (s->persistent || s->cat == cat) return;
    if (s->alive) {
        MeTlEvent e = me_tl_event(ME_TL_RECAT);
        e.storage = id;
        e.bytes = s->bytes;
        e.cat = s->cat;
        e.to = (uint8_t)cat;
        emit(m, &e);
    }
    s->cat = (uint8_t)cat;
}

/* Value v's tensor (its gradient when grad) is storage id from now on. */
static void bind(Sim *m, int v, int id, bool grad)
{
    if (!heard(m, ME_TL_BIND)) return;
    MeTlEvent e = me_tl_event(ME_TL_BIND);
    e.value = v;
    e.storage = id;
    e.grad = grad;
    emit(m, &e);
}

/* A timeline point, where the peak is checked with extra bytes that exist
 * only inside the op. On CUDA the allocator sees them as a block made
 * before and freed after: note_open returns it (-1 none) for the runs in
 * between, note_close frees it. */
static int note_open(Sim *m, int64_t extra)
{
    int t = -1;
    if (!fits(m, extra)) extra = 0;
    if (extra > 0 && m->cuda) {
        if ((t = st_new(m, extra, MEMEST_MEM_TEMPORARY)) < 0) return -1;
        extra = 0;
    }
    MeTlEvent e = me_tl_event(ME_TL_NOTE);
    e.bytes = extra;
    emit(m, &e);
    return t;
}

static void note_close(Sim *m, int t)
{
    if (t >= 0) st_free(m, t);
}

static void note(Sim *m, int64_t extra) { note_close(m, note_open(m, extra)); }

/* Work that runs now, its result in storage (-1 none). */
static void run(Sim *m, MeTlRun what, int storage, int accum, int gout)
{
    if (!heard(m, ME_TL_RUN)) return;
    MeTlEvent e = me_tl_event(ME_TL_RUN);
    e.run = (uint8_t)what;
    e.storage = storage;
    e.accum = accum;
    e.gout = gout;
    emit(m, &e);
}

/* A note with one run inside it (the run's result in the note's temporary
 * when storage is -2). */
static void note_run(Sim *m, int64_t extra, MeTlEvent *r)
{
    int t = note_open(m, extra);
    if (heard(m, ME_TL_RUN)) {
        if (r->storage == -2) r->storage = t;
        emit(m, r);
    }
    note_close(m, t);
}

/* Elements of a shape, 0 when unknown. */
static int64_t numel0(const MeShape *s)
{
    int64_t n = me_shape_numel(s);
    return n > 0 ? n : 0;
}

/* Bytes of a value in this simulation: its element size may differ from
 * the file's dtype under autocast (es). */
static int64_t vb(const Sim *m, const MeValue *v)
{
    if (v->layout_copy) return 0; /* its parameters hold the bytes (canon/rnn.c) */
    if (v->sparse || v->stored_bytes) { /* values and indices; a quantized or header-typed weight as stored */
        uint64_t b = me_value_bytes(v);
        return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
    }
    int64_t n = v->known ? me_shape_numel(&v->shape) : 0;
    int es = m->amp.es ? m->amp.es[v - m->g->v] : me_dtype_size(v->dtype);
    if (v->dtype == ME_DT_U4 || v->dtype == ME_DT_I4) /* packed two a byte; autocast leaves them */
        return (int64_t)me_dtype_bytes(v->dtype, n); /* ceil(n / 2) fits */
    return n > 0 ? sat_mul(n, es) : 0;
}

/* Constant and shape arithmetic are evaluated ahead: nothing at run time. */
bool me_node_skipped(const MeGraph *g, const MeNode *n)
{
    if (!n->desc || n->desc->cls == ME_C_SHAPE) return true;
    /* a Constant node holding a weight: the weight is alive from the start */
    if (!n->n_out || n->out[0] < 0 || !(g->v[n->out[0]].has_val || g->v[n->out[0]].from_constant)) return false;
    /* torch.zeros_like, torch.eye, torch.arange run each time the forward
     * does and allocate what they make; memest knows the contents of a
     * small one only to infer shapes */
    if (n->desc->flags & ME_OPF_FACTORY) return false;
    /* but a view of a parameter is that parameter, whose contents the file
     * happens to hold (an eval export's Identity aliases of equal small
     * initializers, canon/dedup.c): it requires grad */
    const MeValue *x = n->n_in && n->in[0] >= 0 ? &g->v[n->in[0]] : NULL;
    return !(x && x->kind == ME_V_INIT && x->role == ME_R_PARAM && n->desc->view != ME_VIEW_NONE);
}

/* dropout() returns its input untouched outside training and for p = 0
 * (torchvision's ViT default) */
bool me_dropout_identity(const MeGraph *g, const MeNode *n, bool train)
{
    if (!train) return true;
    double p = me_attr_f(n, "ratio", 0.5);
    if (n->n_in > 1 && n->in[1] >= 0) {
        const MeValue *r = &g->v[n->in[1]];
        if (r->has_val && r->nval == 1) p = r->fval ? r->fval[0] : (double)r->ival[0];
    }
    return p == 0;
}

/* PyTorch returns views for these: the result shares the input's storage
 * (a copy happens later only where a kernel needs contiguous data). */
bool me_node_is_view(const MeNode *n) { return n->desc->view != ME_VIEW_NONE || (n->flags & ME_N_SELECT); }

/* Outputs share input 0's storage: views, and ops running in place. */
bool me_node_aliases_input(const MeGraph *g, const MeNode *n, bool train)
{
    if (!n->n_in || n->in[0] < 0) return false;
    if (me_node_is_view(n)) return true;
    if (n->desc->cls == ME_C_DROPOUT && me_dropout_identity(g, n, train)) return true;
    if ((n->desc->flags & ME_OPF_SAME_TYPE_ALIAS) && n->out[0] >= 0 && g->v[n->out[0]].dtype == g->v[n->in[0]].dtype)
        return true;
    return (n->flags & ME_N_INPLACE) != 0;
}

static bool train_mode(const Sim *m) { return m->s->mode == MEMEST_RUN_TRAIN; }

static bool aliases_input(const Sim *m, const MeNode *n)
{
    return n->n_in && n->in[0] >= 0 && m->vst[n->in[0]] >= 0 && me_node_aliases_input(m->g, n, train_mode(m));
}

/* Bytes of operand v as op n computes with it: under autocast an op of the
 * lower-precision list works on fp16/bf16 copies, whatever v's own type. */
static MeAutocast autocast_class(const Sim *m, const MeNode *n);

static int64_t op_vb(const Sim *m, const MeNode *n, const MeValue *v)
{
    if (!v) return 0;
    if (m->s->amp && me_dtype_is_float(v->dtype) && autocast_class(m, n) == ME_AC_LOWER) {
        int64_t k = v->known ? me_shape_numel(&v->shape) : 0;
        return k > 0 ? sat_mul(k, 2) : 0;
    }
    return vb(m, v);
}

static int64_t run_bytes(const MeRunCtx *r, const MeValue *v) { return v ? vb(r->sim, v) : 0; }
static int64_t run_operand_bytes(const MeRunCtx *r, const MeValue *v) { return op_vb(r->sim, r->c.n, v); }
static bool channels_last(const Sim *m, int v);
static bool run_channels_last(const MeRunCtx *r, const MeValue *v)
{
    const Sim *m = r->sim;
    return v && channels_last(m, (int)(v - m->g->v));
}
static bool run_grad_strided(const MeRunCtx *r, const MeValue *v)
{
    const Sim *m = r->sim;
    return v && m->grows[v - m->g->v] > 0;
}
static bool run_needs_grad(const MeRunCtx *r, const MeValue *v)
{
    const Sim *m = r->sim;
    return v && m->rg[v - m->g->v];
}

static const int64_t *strides_of(const Sim *m, int v, int64_t *tmp);
static const int64_t *run_strides(const MeRunCtx *r, const MeValue *v, int64_t *tmp)
{
    const Sim *m = r->sim;
    return strides_of(m, (int)(v - m->g->v), tmp);
}

/* What node n's descriptor hooks may ask of this simulation */
static MeRunCtx run_ctx(const Sim *m, const MeNode *n, int input)
{
    return (MeRunCtx){ .c = { .g = m->g, .n = (MeNode *)n }, .grad = m->grad, .input = input, .sim = m,
                       .threads = m->s->cpu_threads > 0 ? m->s->cpu_threads : MEMEST_CPU_THREADS_DEFAULT, .isa = m->s->cpu_isa,
                       .bytes = run_bytes, .operand_bytes = run_operand_bytes, .needs_grad = run_needs_grad,
                       .channels_last = run_channels_last, .grad_strided = run_grad_strided, .strides = run_strides };
}

/* Bytes an op allocates and frees inside itself, by runtime (doc/memory.md),
 * beyond its outputs: the op's own CPU hooks say how many. */
static int64_t temp_bytes(const Sim *m, const MeNode *n, int64_t (*hook)(const MeRunCtx *r), int input)
{
    if (m->s->runtime != MEMEST_RUNTIME_CPU || !hook) return 0;
    MeRunCtx r = run_ctx(m, n, input);
    return hook(&r);
}

static int64_t temp_forward(const Sim *m, const MeNode *n) { return temp_bytes(m, n, n->desc->cpu_temp_fwd, -1); }

/* ZeRO-3 / FSDP gathers a layer's full parameters while it runs */
static int64_t gathered(const Sim *m, const MeNode *n)
{
    if (m->dp.ranks < 2 || m->dp.shard < MEMEST_SHARD_ZERO3) return 0;
    int64_t b = 0;
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        if (v >= 0 && m->g->v[v].kind == ME_V_INIT && m->g->v[v].role == ME_R_PARAM) b = sat_add(b, vb(m, &m->g->v[v]));
    }
    return b - b / m->dp.ranks;
}

/* What a Linear's kernel allocates around a quantized weight (the weight
 * value's wquant, set by the loader; doc/memory.md "Quantized weights"),
 * all alive while the product is made. x [.., in] holds T tokens, the
 * weight is [out, in]. Sources: bitsandbytes/autograd/_functions.py
 * (v0.43/0.44) and each kernel's docs. */
static int64_t quant_temp(const Sim *m, const MeNode *n)
{
    if (n->desc->cls != ME_C_LINEAR || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) return 0;
    const MeValue *x = &m->g->v[n->in[0]], *w = &m->g->v[n->in[1]];
    if (!w->wquant || w->shape.rank != 2 || !x->known || x->shape.rank < 1) return 0;
    int64_t out = w->shape.d[0], in = w->shape.d[1], xn = numel0(&x->shape);
    int64_t T = in > 0 ? xn / in : 0, es = me_dtype_size(x->dtype);
    switch ((MeWeightQuant)w->wquant) {
    case ME_WQ_BNB4:
        /* matmul_4bit: one token (A.numel() == A.shape[-1]) without grad,
         * or any input on the CPU, runs gemv_4bit on the packed weight;
         * otherwise MatMul4Bit.forward makes F.dequantize_4bit(B).to(A.dtype):
         * the whole [out, in] weight in the compute dtype */
        if ((T == 1 && !m->grad) || m->s->runtime == MEMEST_RUNTIME_CPU) return 0;
        return sat_mul(sat_mul(out, in), es);
    case ME_WQ_BNB8: {
        /* MatMul8bitLt.forward (igemmlt): A.to(float16) (a copy unless A is
         * fp16); F.double_quant: CA and CAt int8 [T, in], SCA fp32 [T], SCAt
         * fp32 [in]; F.transform(CA, "col32"): int8 [T, in]; igemmlt: out32
         * int32 [T, out]; mm_dequant: fp16 [T, out], .to(A.dtype) and (a 3-d
         * input) the clone that returns: all locals until the return */
        int64_t b = x->dtype == ME_DT_F16 ? 0 : sat_mul(xn, 2);
        b = sat_add(b, sat_add(sat_mul(3, xn), sat_add(sat_mul(4, T), sat_mul(4, in))));
        b = sat_add(b, sat_mul(sat_mul(T, out), 4 + (es > 2 ? es : 2)));
        return b;
    }
    case ME_WQ_FP8:
        /* the activation quantized per tensor to e4m3 (one byte) with one
         * fp32 scale, then torch._scaled_mm into the compute dtype */
        return sat_add(xn, 4);
    default:
        return 0; /* GPTQ/AWQ (exllama, marlin): dequantized in registers */
    }
}

/* while input i's gradient is made: one op's backward may run a kernel
 * per input (oneDNN's backward-data, then backward-weights) */
static int64_t temp_backward(const Sim *m, const MeNode *n, int i)
{
    int64_t t = temp_bytes(m, n, n->desc->cpu_temp_bwd, i);
    if (n->desc->temp_bwd) {
        MeRunCtx r = run_ctx(m, n, i);
        t = sat_add(t, n->desc->temp_bwd(&r));
    }
    return t;
}

/* QLoRA's frozen 4-bit base in backward: MatMul4Bit.backward (bitsandbytes
 * autograd/_functions.py, v0.43) makes grad_A = torch.matmul(grad_output,
 * F.dequantize_4bit(B, ctx.state).to(grad_output.dtype).t()): the whole
 * [out, in] weight dequantized again in the gradient's dtype while
 * grad_A is made. Its forward saved no copy (ctx.tensors = (None, B)). */
static int64_t quant_temp_backward(const Sim *m, const MeNode *n)
{
    if (n->desc->cls != ME_C_LINEAR || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0 || !m->rg[n->in[0]]) return 0;
    const MeValue *x = &m->g->v[n->in[0]], *w = &m->g->v[n->in[1]];
    if (w->wquant != ME_WQ_BNB4 || w->shape.rank != 2 || m->s->runtime == MEMEST_RUNTIME_CPU) return 0;
    return sat_mul(sat_mul(w->shape.d[0], w->shape.d[1]), me_dtype_size(x->dtype));
}

static bool requires_grad_any_out(const Sim *m, const MeNode *n)
{
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && m->rg[n->out[k]]) return true;
    return false;
}

/* Appends storage id to node ni's saved list (links from one pool: a
 * million nodes would otherwise mean a million small reallocs). */
static bool save_link(Sim *m, int ni, int id)
{
    if (me_grow_raw(&m->saved.links, &m->saved.cap_links, m->saved.nlinks + 1, sizeof(*m->saved.links)) < 0) {
        m->failed = true;
        return false;
    }
    m->saved.links[m->saved.nlinks] = (struct SavedLink){ .id = id, .next = -1 };
    if (m->saved.saved_head[ni] < 0) m->saved.saved_head[ni] = m->saved.nlinks;
    else m->saved.links[m->saved.saved_tail[ni]].next = m->saved.nlinks;
    m->saved.saved_tail[ni] = m->saved.nlinks++;
    return true;
}

static void keep_storage(Sim *m, int ni, int id)
{
    if (!save_link(m, ni, id)) return;
    m->st[id].holds++;
    if (m->st[id].cat == MEMEST_MEM_ACTIVATIONS) st_recat(m, id, MEMEST_MEM_SAVED);
}

static void keep_for_backward(Sim *m, int ni, int vi)
{
    /* Megatron's sequence-parallel linear saves the shard it gathered
     * from and gathers again in backward (ops/comm.c) */
    int p = vi >= 0 ? m->g->v[vi].producer : -1;
    if (p >= 0 && m->g->n[p].desc && (m->g->n[p].desc->flags & ME_OPF_REGATHER) && me_attr_i(&m->g->n[p], "regather", 0) && m->g->n[p].in[0] >= 0)
        vi = m->g->n[p].in[0];
    if (vi < 0 || m->vst[vi] < 0) return;
    int id = m->vst[vi];
    for (int e = m->saved.saved_head[ni]; e >= 0; e = m->saved.links[e].next)
        if (m->saved.links[e].id == id) return; /* one storage is kept once */
    keep_storage(m, ni, id);
}

/* torch 2's F.multi_head_attention_forward (torch/nn/functional.py, v2.0
 * on; need_weights=False) calls scaled_dot_product_attention(q, k, v, mask,
 * dropout_p) where v1.13's wrote out the ops canon/mha.c marks: the
 * scale, scores, mask, softmax and dropout (ME_N_ATTN_CORE) make no tensor
 * (the kernel scales inside and keeps no [B*H, T, S] matrix; dropout draws
 * from a Philox seed), and the context bmm (ME_N_ATTN_CTX) stands for the
 * call, its result the output. Measured on torch 2.11
 * (golden/truth/saved/, tests/measure/saved_tensors.py --trace): the
 * forward makes only the output and a logsumexp; autograd keeps q, k, v,
 * the output and the logsumexp (ScaledDotProduct*AttentionBackward0), and
 * the backward makes q's, k's and v's gradients at once. */
static bool attn_core(const Sim *m, const MeNode *n) { return m->sdpa && (n->flags & ME_N_ATTN_CORE); }
static bool attn_ctx(const Sim *m, const MeNode *n) { return m->sdpa && (n->flags & ME_N_ATTN_CTX); }

/* v, or what a core scale multiplied: q / sqrt(E) (mha.c), x * sqrt(scale)
 * (sdpa.c puts x first) */
static int unscaled_operand(const MeGraph *g, int v)
{
    int p = v >= 0 ? g->v[v].producer : -1;
    return p >= 0 && (g->n[p].flags & ME_N_ATTN_CORE) && g->n[p].n_in >= 1 ? g->n[p].in[0] : v;
}

/* The call's q and k.transpose(-2, -1): the scores bmm's operands, the
 * scale undone, found back from the context bmm through the core */
static void attn_operands(const MeGraph *g, const MeNode *ctx, int *q, int *kt)
{
    *q = *kt = -1;
    int v = ctx->in[0];
    for (int guard = 0; v >= 0 && guard < 32; guard++) {
        int p = g->v[v].producer;
        if (p < 0 || !(g->n[p].flags & ME_N_ATTN_CORE)) return;
        const MeNode *x = &g->n[p];
        if (x->desc && x->desc->cls == ME_C_MATMUL && x->n_in == 2) {
            *q = unscaled_operand(g, x->in[0]); /* q / sqrt(E), or q * sqrt(scale) */
            *kt = unscaled_operand(g, x->in[1]); /* SDPA's export scales kᵀ too (canon/sdpa.c) */
            return;
        }
        /* the link the chain came through: an input a core op made */
        int next = x->n_in ? x->in[0] : -1;
        for (int i = 0; i < x->n_in; i++) {
            int pi = x->in[i] >= 0 ? g->v[x->in[i]].producer : -1;
            if (pi >= 0 && (g->n[pi].flags & ME_N_ATTN_CORE)) { next = x->in[i]; break; }
        }
        v = next;
    }
}

/* Which kernel SDPA picks on CUDA: flash or cuDNN for fp16/bf16 (the
 * output's element size under autocast), the memory-efficient one for
 * fp32; false on a CPU (its flash kernel) */
static bool attn_half_cuda(const Sim *m, const MeNode *ctx)
{
    const MeValue *o = &m->g->v[ctx->out[0]];
    return m->cuda && vb(m, o) < sat_mul(numel0(&o->shape), 4);
}

/* The logsumexp the kernel returns, fp32, [B*H, T] rows from q's
 * [B*H, T, head_dim]: the memory-efficient kernel (fp32 on CUDA) pads T to
 * a multiple of 32 (_efficient_attention_forward, kAlignLSE; measured
 * [8, 12, 224] for T = 197), flash and cuDNN (fp16/bf16 on CUDA) and the
 * CPU's flash kernel keep T. */
static int64_t attn_lse_bytes(const Sim *m, const MeNode *ctx, int q)
{
    if (q < 0 || ctx->out[0] < 0) return 0;
    const MeShape *qs = &m->g->v[q].shape;
    if (qs->rank < 2) return 0;
    int64_t rows = numel0(qs) / (qs->d[qs->rank - 1] > 0 ? qs->d[qs->rank - 1] : 1), t = qs->d[qs->rank - 2];
    if (m->cuda && !attn_half_cuda(m, ctx) && t > 0) rows = sat_mul(rows / t, (t + 31) / 32 * 32);
    return sat_mul(rows, 4);
}

/* What the SDPA call (operands q and kt: attn_operands) saves: q, k, v,
 * its output, the logsumexp */
static void attn_saved(Sim *m, int ni, const MeNode *n, int q, int kt)
{
    keep_for_backward(m, ni, q);
    keep_for_backward(m, ni, kt);
    keep_for_backward(m, ni, n->in[1]);
    keep_for_backward(m, ni, n->out[0]);
    int64_t lse = attn_lse_bytes(m, n, q);
    if (lse > 0) {
        int id = st_new(m, lse, MEMEST_MEM_SAVED);
        if (id < 0 || !save_link(m, ni, id)) return;
        m->st[id].holds = 1;
    }
}

static void record_saved(Sim *m, int ni, const MeNode *n)
{
    MeCtx c = { .g = m->g, .n = (MeNode *)n };
    switch (me_autograd_rule(n, (MemestTorch)m->s->torch)) {
    case ME_AG_OPERANDS:
        for (int i = 0; i < n->n_in; i++) {
            if (n->in[i] < 0) continue;
            bool other = false;
            for (int j = 0; j < n->n_in; j++)
                if (j != i && n->in[j] >= 0 && m->rg[n->in[j]]) other = true;
            if (!other) continue;
            if (i < 2 && m->layout.mm_copy[i] >= 0) keep_storage(m, ni, m->layout.mm_copy[i]); /* bmm saw the copy */
            else if (i < 8 && m->amp.cast[i] >= 0) keep_storage(m, ni, m->amp.cast[i]); /* autocast's copy */
            else keep_for_backward(m, ni, n->in[i]);
        }
        break;
    case ME_AG_INPUT:
        if (n->in[0] >= 0 && m->rg[n->in[0]]) {
            if (m->amp.cast[0] >= 0) keep_storage(m, ni, m->amp.cast[0]);
            else keep_for_backward(m, ni, n->in[0]);
        }
        break;
    case ME_AG_OUTPUT:
        keep_for_backward(m, ni, n->out[0]);
        break;
    case ME_AG_ALL:
        for (int i = 0; i < n->n_in; i++) {
            if (n->in[i] < 0) continue;
            if (i < 8 && m->amp.cast[i] >= 0) keep_storage(m, ni, m->amp.cast[i]); /* autocast's copy */
            else keep_for_backward(m, ni, n->in[i]);
        }
        break;
    case ME_AG_INDEX:
        for (int i = 0; i < n->n_in && n->n_in > 1; i++)
            if (i != 1 && n->in[i] >= 0 && m->rg[n->in[i]]) {
                keep_for_backward(m, ni, n->in[1]);
                break;
            }
        break;
    case ME_AG_DIV:
        if (n->n_in > 1) {
            keep_for_backward(m, ni, n->in[1]);
            if (n->in[1] >= 0 && m->rg[n->in[1]]) keep_for_backward(m, ni, n->in[0]);
        }
        break;
    default:
        break;
    }
    int so = n->desc->saved_out;
    if (so > 0 && so < n->n_out && n->out[so] >= 0) keep_for_backward(m, ni, n->out[so]);
    /* SDPA's backward reads its output (derivatives.yaml:
     * _scaled_dot_product_{flash,efficient}_attention_backward(grad_out, query, key, value, out, logsumexp, ...)) */
    if ((n->desc->flags & ME_OPF_SDPA_OUT) && n->out[0] >= 0) keep_for_backward(m, ni, n->out[0]);
    uint64_t kept = n->desc->cls == ME_C_DROPOUT && me_dropout_identity(m->g, n, train_mode(m)) ? 0 : me_autograd_extra(&c, train_mode(m));
    int64_t extra = kept > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)kept; /* saturated: st_new reports it */
    /* on a CPU, dropout is not the fused kernel with a bool mask: it
     * multiplies by a float noise tensor, which autograd keeps */
    if (extra && n->desc->cls == ME_C_DROPOUT && m->s->runtime == MEMEST_RUNTIME_CPU && n->in[0] >= 0) extra = sat_mul(extra, m->amp.es[n->in[0]]);
    if (extra > 0) {
        int id = st_new(m, extra, MEMEST_MEM_SAVED);
        if (id < 0 || !save_link(m, ni, id)) return;
        m->st[id].holds = 1;
    }
}

static void hold_for_segment(Sim *m, int s, int id)
{
    if (id < 0 || m->st[id].persistent) return;
    int *nh = me_realloc(m->ckpt.seg_held[s], sizeof(int) * (size_t)(m->ckpt.n_seg_held[s] + 1));
    if (!nh) { m->failed = true; return; }
    m->ckpt.seg_held[s] = nh;
    nh[m->ckpt.n_seg_held[s]++] = id;
    m->st[id].holds++;
}

static void release_segment(Sim *m, int s)
{
    for (int k = 0; k < m->ckpt.n_seg_held[s]; k++) {
        m->st[m->ckpt.seg_held[s][k]].holds--;
        st_release(m, m->ckpt.seg_held[s][k]);
    }
    m->ckpt.n_seg_held[s] = 0;
}

/* --- strides: which views are really views ---
 * PyTorch gives views for Transpose, Slice, Split and Expand; reshape() and
 * flatten() are views only when the strides allow (ATen's computeStride),
 * else a copy; a batched matmul folds its operands to 3-d the same way and
 * autograd keeps what bmm saw. */
/* Strides of value v (tmp holds contiguous ones, which are not stored). */
static const int64_t *strides_of(const Sim *m, int v, int64_t *tmp)
{
    if (m->layout.stride_at[v] >= 0) return m->layout.strides[m->layout.stride_at[v]];
    me_shape_strides(&m->g->v[v].shape, tmp);
    return tmp;
}

static void set_strides(Sim *m, int v, const int64_t *st)
{
    const MeShape *s = &m->g->v[v].shape;
    /* a transpose of [L, 1, E] is still contiguous: not stored */
    if (me_shape_contiguous(s, st)) { m->layout.stride_at[v] = -1; return; }
    if (m->layout.stride_at[v] < 0) {
        if (me_grow_raw(&m->layout.strides, &m->layout.cap_strides, m->layout.nstrides + 1, sizeof(*m->layout.strides)) < 0) {
            m->failed = true;
            return;
        }
        m->layout.stride_at[v] = m->layout.nstrides++;
    }
    memcpy(m->layout.strides[m->layout.stride_at[v]], st, sizeof(int64_t) * (size_t)s->rank);
}

/* A 4-d value laid out channels-last (NHWC strides: what permute(0, 3, 1,
 * 2) of a contiguous [N, H, W, C] gives; dims of size 1 may have any
 * stride), as ATen's suggest_memory_format sees it. */
static bool channels_last(const Sim *m, int v)
{
    if (v < 0 || m->layout.stride_at[v] < 0) return false;
    const MeShape *s = &m->g->v[v].shape;
    if (s->rank != 4 || s->d[1] == 1) return false;
    const int64_t *st = m->layout.strides[m->layout.stride_at[v]];
    static const int order[4] = { 1, 3, 2, 0 }; /* innermost first */
    int64_t want = 1;
    for (int i = 0; i < 4; i++) {
        int d = order[i];
        if (s->d[d] != 1 && st[d] != want) return false;
        want *= s->d[d];
    }
    return true;
}

static void set_channels_last(Sim *m, int v)
{
    const MeShape *s = &m->g->v[v].shape;
    int64_t st[ME_MAX_RANK] = { s->d[1] * s->d[2] * s->d[3], 1, s->d[3] * s->d[1], s->d[1] };
    set_strides(m, v, st);
}

/* The order operand strides st give shape s's dims, innermost first, as
 * TensorIterator's reorder_dimensions sorts them: false when they do not
 * order every dim (a stride 0, equal strides), so a later operand decides.
 * Dims of size 1 carry no layout and are left out (*n: the others). */
static bool dims_order(const MeShape *s, const int64_t *st, int *idx, int *n)
{
    *n = 0;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] != 1) {
            if (st[i] == 0) return false;
            idx[(*n)++] = i;
        }
    for (int i = 1; i < *n; i++) /* insertion: rank <= 8 */
        for (int j = i; j > 0 && st[idx[j]] < st[idx[j - 1]]; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    for (int i = 1; i < *n; i++)
        if (st[idx[i]] == st[idx[i - 1]]) return false;
    return true;
}

/* A new tensor's layout. TensorIterator's ops (elementwise, activations,
 * dropout) lay their output out as their operands are (compute_strides
 * and reorder_dimensions: the dims sorted by the first operand whose
 * strides order them, so an operand of the output's shape laid out as a
 * permutation of a contiguous tensor, a transposed [B, C, T] stream or a
 * channels-last image, gives its layout, and a contiguous one before it
 * gives the plain one: `x = input + y.permute(0, 3, 1, 2)` is NCHW, `y +=
 * input` stays channels-last). The CPU convolution and batch norm write
 * channels-last where their input is (mkldnn_conv_use_channels_last,
 * batch_norm_cpu's suggest_memory_format): ConvNeXt's blocks, whose
 * LayerNorm2d permutes back to NCHW, run on channels-last tensors. Any
 * other new tensor is contiguous. */
static void new_layout(Sim *m, const MeNode *n, int v)
{
    int cls = n->desc ? n->desc->cls : ME_C_OTHER;
    bool follows = cls == ME_C_ELTWISE || cls == ME_C_RELU || cls == ME_C_ACT || cls == ME_C_DROPOUT;
    bool first = (cls == ME_C_CONV || cls == ME_C_BN) && m->g->v[v].shape.rank == 4;
    if (!follows && !first) return;
    const MeShape *o = &m->g->v[v].shape;
    for (int i = 0; i < (first ? 1 : n->n_in); i++) {
        int x = n->in[i];
        if (x < 0) continue;
        if (first) {
            if (channels_last(m, x)) set_channels_last(m, v);
            return;
        }
        const MeShape *xs = &m->g->v[x].shape;
        if (xs->rank != o->rank || memcmp(xs->d, o->d, sizeof(int64_t) * (size_t)o->rank)) continue;
        if (m->layout.stride_at[x] < 0) { /* contiguous: the plain order, if it orders anything */
            int big = 0;
            for (int k = 0; k < o->rank; k++) big += o->d[k] != 1;
            if (big > 1) return;
            continue;
        }
        int idx[ME_MAX_RANK], k;
        if (!dims_order(xs, m->layout.strides[m->layout.stride_at[x]], idx, &k)) continue;
        int64_t st[ME_MAX_RANK], c = 1;
        me_shape_strides(o, st); /* size-1 dims: any stride */
        for (int j = 0; j < k; j++) {
            st[idx[j]] = c;
            c = sat_mul(c, o->d[idx[j]]);
        }
        set_strides(m, v, st); /* the plain order comes out contiguous */
        return;
    }
}

/* Strides of a view op's output from its input's; false when PyTorch would
 * copy instead. */
static bool view_result_strides(const Sim *m, const MeNode *n, int k, int64_t *yst)
{
    MeGraph *g = m->g;
    int x = n->in[0], y = n->out[k];
    const MeShape *xs = &g->v[x].shape, *ys = &g->v[y].shape;
    int64_t tmp[ME_MAX_RANK];
    const int64_t *xst = strides_of(m, x, tmp);
    if (n->flags & ME_N_SELECT) { /* select(): the axis dropped */
        int64_t axis = me_attr_i(n, "axis", 0);
        if (axis < 0) axis += xs->rank;
        if (axis < 0 || axis >= xs->rank || ys->rank != xs->rank - 1) return false;
        for (int i = 0, j = 0; i < xs->rank; i++)
            if (i != axis) yst[j++] = xst[i];
        return true;
    }
    switch (n->desc->view) {
    case ME_VIEW_PERMUTE: {
        int64_t perm[ME_MAX_RANK];
        const MeAttr *a = me_node_attr(n, "perm");
        for (int i = 0; i < xs->rank; i++) perm[i] = a && a->type == ME_A_INTS && i < a->n ? a->ints[i] : xs->rank - 1 - i;
        for (int i = 0; i < ys->rank; i++) yst[i] = perm[i] >= 0 && perm[i] < xs->rank ? xst[perm[i]] : 1;
        return true;
    }
    case ME_VIEW_SAME:
        /* offsets do not change strides; Slice steps other than 1 are rare here */
        for (int i = 0; i < ys->rank; i++) yst[i] = i < xs->rank ? xst[i] : 1;
        return ys->rank == xs->rank;
    case ME_VIEW_EXPAND: {
        int off = ys->rank - xs->rank;
        for (int i = 0; i < ys->rank; i++) {
            int j = i - off;
            yst[i] = j < 0 || (xs->d[j] == 1 && ys->d[i] != 1) ? 0 : xst[j];
        }
        return true;
    }
    case ME_VIEW_SQUEEZE: {
        /* size-1 dims carry no layout: keep the others' strides in order */
        int j = 0;
        for (int i = 0; i < ys->rank; i++) {
            while (j < xs->rank && xs->d[j] == 1 && ys->d[i] != 1) j++;
            if (ys->d[i] == 1 && (j >= xs->rank || xs->d[j] != 1)) { yst[i] = 1; continue; }
            yst[i] = j < xs->rank ? xst[j++] : 1;
        }
        return true;
    }
    case ME_VIEW_RESHAPE:
        if ((n->flags & ME_N_CONTIGUOUS) && m->layout.stride_at[x] >= 0) return false; /* strided: contiguous() copies */
        return me_view_strides(xs, xst, ys, yst);
    case ME_VIEW_NONE:
        break;
    }
    return false;
}

static bool view_result(Sim *m, const MeNode *n, int k)
{
    int64_t yst[ME_MAX_RANK] = { 0 };
    if (!view_result_strides(m, n, k, yst)) return false;
    set_strides(m, n->out[k], yst);
    return true;
}

/* torch.autocast: ops of its lower-precision list run in fp16/bf16 and
 * cast their float inputs (weights once per forward, into a cache); ops of
 * its fp32 list cast up; the rest follow their inputs' promoted type. Which
 * list an op is on is its descriptor's autocast class. */

static bool castable(const MeGraph *g, int v)
{
    return v >= 0 && me_dtype_is_float(g->v[v].dtype) && !g->v[v].has_val && g->v[v].shape.rank > 0;
}

/* The autocast list node n is on: autocast follows the device, CPU and
 * CUDA keep different lists (the descriptor states both). */
static MeAutocast autocast_class(const Sim *m, const MeNode *n)
{
    bool cpu = m->s->runtime == MEMEST_RUNTIME_CPU;
    MeAutocast k = cpu ? n->desc->autocast_cpu : n->desc->autocast;
    if (k == ME_AC_BY_ATTRS) k = n->desc->autocast_rule(n, cpu);
    if (k == ME_AC_FP32_3D) /* the 3-d pooling kernels are listed, the 1-d and 2-d ones not */
        k = n->n_in && n->in[0] >= 0 && m->g->v[n->in[0]].shape.rank == 5 ? ME_AC_FP32 : ME_AC_FOLLOW;
    return k;
}

/* Output element sizes and input casts of node n under autocast. */
static void autocast_node(Sim *m, const MeNode *n)
{
    MeGraph *g = m->g;
    for (int i = 0; i < 8; i++) m->amp.cast[i] = -1;
    MeAutocast kind = autocast_class(m, n);
    int oes = 0;
    if (kind == ME_AC_INPUT) {
        oes = m->amp.es[n->in[0]]; /* batch_norm runs in its input's type, fp32 weights and all */
    } else if (kind == ME_AC_FOLLOW) {
        /* type promotion: the widest float tensor operand wins */
        for (int i = 0; i < n->n_in; i++)
            if (castable(g, n->in[i]) && m->amp.es[n->in[i]] > oes) oes = m->amp.es[n->in[i]];
    } else {
        oes = kind == ME_AC_LOWER ? 2 : 4;
        for (int i = 0; i < n->n_in && i < 8; i++) {
            int v = n->in[i];
            if (!castable(g, v) || m->amp.es[v] == oes || m->vst[v] < 0) continue;
            int64_t bytes = sat_mul(numel0(&g->v[v].shape), oes);
            if (g->v[v].kind == ME_V_INIT && oes == 2) {
                if (m->amp.wcache[v] < 0) {
                    /* the cache keeps the copy until autocast exits */
                    if ((m->amp.wcache[v] = st_new(m, bytes, MEMEST_MEM_AMP_CACHE)) < 0) return;
                    m->st[m->amp.wcache[v]].holds = 1;
                }
                m->amp.cast[i] = m->amp.wcache[v];
            } else if ((m->amp.cast[i] = st_new(m, bytes, MEMEST_MEM_ACTIVATIONS)) < 0) {
                return;
            }
        }
    }
    for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k];
        if (v >= 0 && me_dtype_is_float(g->v[v].dtype) && oes) m->amp.es[v] = (uint8_t)oes;
    }
}

/* at::matmul with both operands batched (LinearAlgebra.cpp, v1.13): the
 * batch dims both broadcast to (infer_size, right-aligned) go to batch,
 * and factor[i] is how many times operand i is expanded to them (1: its
 * batch is the broadcast one). Returns the batch's rank, 0: not such a
 * matmul. */
static int bmm_broadcast(const MeGraph *g, const MeNode *n, int64_t *batch, int64_t factor[2])
{
    if (!(n->desc->flags & ME_OPF_BMM_FOLD) || n->n_in != 2 || n->in[0] < 0 || n->in[1] < 0) return 0;
    const MeShape *s[2] = { &g->v[n->in[0]].shape, &g->v[n->in[1]].shape };
    if (s[0]->rank < 3 || s[1]->rank < 3) return 0;
    int nb = (s[0]->rank > s[1]->rank ? s[0]->rank : s[1]->rank) - 2;
    factor[0] = factor[1] = 1;
    for (int j = 0; j < nb; j++) {
        int64_t d[2];
        for (int i = 0; i < 2; i++) { /* the operand's batch dim, or 1 where it has fewer */
            int ji = j - (nb - (s[i]->rank - 2));
            d[i] = ji >= 0 ? s[i]->d[ji] : 1;
        }
        batch[j] = d[0] == 1 ? d[1] : d[0];
        for (int i = 0; i < 2; i++)
            if (d[i] != batch[j]) factor[i] = sat_mul(factor[i], batch[j]);
    }
    return nb;
}

/* Bytes of the contiguous copy matmul's reshape() makes of operand i: under
 * autocast it copies the cast the op computes with (cached_cast's
 * arg.to(dtype) keeps the strides, preserve_format, so the cast is as
 * strided as the value and the copy is of the cast: autocast_mode.cpp and
 * LinearAlgebra.cpp, v1.13), not the value in its own type. */
static int64_t fold_copy_bytes(const Sim *m, const MeNode *n, int i)
{
    int c = i < 8 ? m->amp.cast[i] : -1;
    return c >= 0 ? m->st[c].bytes : vb(m, &m->g->v[n->in[i]]);
}

/* at::linear (ME_OPF_FOLD_INPUT), or at::matmul with a matrix on the
 * right: an input of rank >= 3 is folded to 2-d for mm */
static bool folds_input(const MeGraph *g, const MeNode *n)
{
    return (n->desc->flags & ME_OPF_FOLD_INPUT) ||
           ((n->desc->flags & ME_OPF_BMM_FOLD) && n->n_in == 2 && n->in[1] >= 0 && g->v[n->in[1]].shape.rank <= 2);
}

/* at::matmul's should_fold (LinearAlgebra.cpp, v1.13): a 3-d left operand
 * times a matrix is folded to 2-d for mm, unless its last two dims are
 * transposed over a slowest first dim (permute(0, 2, 1): last stride not
 * 1, first stride the other two sizes' product); then bmm runs on it as it
 * is, with the matrix expanded to the batch: no copy, and the matrix's
 * gradient is made at the batch's size before ExpandBackward sums it.
 * Returns that batch, 0 when the operand folds (or is no such matmul). */
static int64_t unfolded_batch(const Sim *m, const MeNode *n)
{
    const MeGraph *g = m->g;
    if (!folds_input(g, n) || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0 || g->v[n->in[1]].shape.rank != 2) return 0;
    const MeShape *xs = &g->v[n->in[0]].shape;
    if (xs->rank != 3) return 0;
    int64_t tmp[ME_MAX_RANK];
    const int64_t *st = strides_of(m, n->in[0], tmp);
    return st[2] != 1 && st[0] == sat_mul(xs->d[1], xs->d[2]) ? xs->d[0] : 0;
}

/* Runs node ni (at position oi) forward. grad: autograd records it.
 * redo: a checkpointed segment recomputed in backward (readers outside the
 * segment are done; outputs leaving it are held until its backward ends). */
/* A node's output v, just made in storage id at position oi: read by its
 * users, held when it is a graph output or a module scope keeps it. */
static void keep_output(Sim *m, int v, int id, int oi)
{
    bool out = m->g->v[v].is_output;
    m->st[id].refs += m->g->v[v].n_uses - (out ? 1 : 0);
    if (out) m->st[id].holds++;
    if (m->hold.hold_end[v] > oi) {
        m->st[id].holds++;
        m->hold.hold_next[v] = m->hold.hold_head[m->hold.hold_end[v]];
        m->hold.hold_head[m->hold.hold_end[v]] = v;
    }
}

static bool gemm_class(MeCostClass cls)
{
    return cls == ME_C_LINEAR || cls == ME_C_MATMUL || cls == ME_C_ATTENTION || cls == ME_C_RNN;
}

/* cuBLAS keeps one workspace per (handle, stream), taken from the caching
 * allocator at the handle's first GEMM and held until the process ends
 * (CublasHandlePool.cpp, cublas_handle_stream_to_workspace). Handles are
 * per thread: the forward's thread has one, and the autograd engine's
 * device thread, which runs a CUDA backward, has its own. */
static int cublas_workspace(Sim *m)
{
    int ws = st_new(m, (int64_t)(m->s->cublas_workspace ? m->s->cublas_workspace : 8519680), MEMEST_MEM_WORKSPACE);
    if (ws >= 0) m->st[ws].persistent = true;
    return ws;
}

static bool opaque(const MeGraph *g, const MeNode *n);

/* The node runs its op: known, with known shapes, not folded away */
static bool runs_op(const MeGraph *g, const MeNode *n) { return n->desc && !opaque(g, n) && !me_node_skipped(g, n); }

/* value → frozen: a weight is frozen when a frozen layer reads it (one
 * pass over the edges); NULL when out of memory */
static bool *frozen_weights(const MeGraph *g)
{
    bool *frozen = me_calloc((size_t)g->nv + 1, sizeof(bool));
    for (int k = 0; frozen && k < g->nn; k++)
        if (g->n[k].flags & ME_N_FROZEN)
            for (int j = 0; j < g->n[k].n_in; j++)
                if (g->n[k].in[j] >= 0) frozen[g->n[k].in[j]] = true;
    return frozen;
}

/* Which handles a step's GEMMs run on, known before it runs, so that a
 * later step starts with their workspaces made: the forward's if a
 * GEMM-class op runs, the backward's if one passes a gradient
 * (requires_grad as forward_node sets it, from the leaves in m->rg). */
static int gemm_handles(const Sim *m, bool *fwd, bool *bwd)
{
    const MeGraph *g = m->g;
    *fwd = *bwd = false;
    bool *rg = me_malloc(sizeof(bool) * (size_t)(g->nv + 1));
    if (!rg) return ME_ENOMEM;
    memcpy(rg, m->rg, sizeof(bool) * (size_t)g->nv);
    for (int oi = 0; oi < g->nn; oi++) {
        const MeNode *n = &g->n[g->order[oi]];
        bool run = runs_op(g, n), any = false, out = false;
        for (int i = 0; run && i < n->n_in; i++) any |= n->in[i] >= 0 && rg[n->in[i]];
        for (int k = 0; k < n->n_out; k++) {
            int v = n->out[k];
            if (v < 0) continue;
            bool hook = g->v[v].requires_grad && m->s->checkpoint == MEMEST_CHECKPOINT_LAYERS;
            rg[v] = run && m->grad && (any || hook) && me_dtype_is_float(g->v[v].dtype);
            out |= rg[v];
        }
        if (run && gemm_class(n->desc->cls)) {
            *fwd = true;
            *bwd |= out;
        }
    }
    me_free(rg);
    return 0;
}

/* The SDPA call's output [B*H, T, hd] (F.multi_head_attention_forward's
 * [B, H, T, hd] view): the flash and cuDNN kernels (fp16/bf16 on CUDA)
 * allocate it with q's strides (mha_fwd's empty_like(q); measured on
 * cuDNN's), and q is a view of a [T, B, H, hd] tensor, so the function's
 * permute(2, 0, 1, 3).contiguous() copies nothing (measured: no clone
 * before out_proj under bf16, torch 2.11). The memory-efficient kernel
 * (fp32) and the CPU's allocate [B, T, H, hd], which the permute copies
 * unless B is 1 (q's [T, B * H, hd] view, read back from the function's
 * q.view(), says B). */
static void attn_out_layout(Sim *m, const MeNode *ctx, int q)
{
    const MeGraph *g = m->g;
    int out = ctx->out[0];
    const MeShape *s = &g->v[out].shape;
    bool half = attn_half_cuda(m, ctx);
    if (s->rank == 4) {
        /* F.scaled_dot_product_attention's [B, H, S, hd] (canon/sdpa.c):
         * flash and cuDNN allocate it as q (empty_like of q.transpose(1,
         * 2)); the memory-efficient kernel (res [B, M, H, K]) and the
         * CPU's flash kernel (_scaled_dot_product_flash_attention_cpu:
         * empty({B, S, H, hd}) then transpose(1, 2)) as [B, S, H, hd], so
         * the caller's transpose(1, 2).reshape(B, S, H * hd) copies nothing */
        int64_t tmp[ME_MAX_RANK];
        if (half && q >= 0 && g->v[q].shape.rank == 4 && !memcmp(g->v[q].shape.d, s->d, sizeof(s->d[0]) * 4)) set_strides(m, out, strides_of(m, q, tmp));
        else if (!half) {
            int64_t st[4] = { sat_mul(sat_mul(s->d[2], s->d[1]), s->d[3]), s->d[3], sat_mul(s->d[1], s->d[3]), 1 };
            set_strides(m, out, st);
        }
        return;
    }
    if (s->rank != 3) return;
    int p = q >= 0 ? g->v[q].producer : -1; /* q.view(T, B * H, hd).transpose(0, 1) */
    int r = p >= 0 && g->n[p].desc && g->n[p].desc->view == ME_VIEW_PERMUTE && g->n[p].in[0] >= 0 ? g->v[g->n[p].in[0]].producer : -1;
    const MeShape *x = r >= 0 && g->n[r].desc && g->n[r].desc->view == ME_VIEW_RESHAPE && g->n[r].in[0] >= 0 ? &g->v[g->n[r].in[0]].shape : NULL;
    bool one = x && x->rank == 3 && x->d[1] == 1; /* [T, B, E] */
    if (!half && !one) return;
    int64_t st[3] = { s->d[2], sat_mul(s->d[0], s->d[2]), 1 };
    set_strides(m, out, st);
}

/* Node n's reads end (a recompute's of segment s: only those made in it),
 * and outputs nobody reads go */
static void end_reads(Sim *m, const MeNode *n, bool redo, int s)
{
    const MeGraph *g = m->g;
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        if (v < 0 || m->vst[v] < 0) continue;
        if (redo && (g->v[v].producer < 0 || m->ckpt.seg[g->v[v].producer] != s)) continue; /* held by the segment */
        m->st[m->vst[v]].refs--;
        st_release(m, m->vst[v]);
    }
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) st_release(m, m->vst[n->out[k]]);
}

/* An op inside the SDPA call (attn_core) makes nothing: its result stands
 * on q's storage (the scale's and the scores' left operand) or on the
 * core link it reads, which the call reads in the end */
static int attn_core_storage(Sim *m, const MeNode *n)
{
    const MeGraph *g = m->g;
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i], p = v >= 0 ? g->v[v].producer : -1;
        if (p >= 0 && (g->n[p].flags & ME_N_ATTN_CORE) && m->vst[v] >= 0) return m->vst[v];
    }
    if (n->n_in && n->in[0] >= 0 && m->vst[n->in[0]] >= 0) return m->vst[n->in[0]];
    return st_new(m, 0, MEMEST_MEM_ACTIVATIONS);
}

/* What a chain step reads (MeChain): autograd keeps it for the step's
 * backward (an input: the value, or autocast's copy the op read) */
static void chain_keep(Sim *m, int ni, const MeNode *n, const int *ids, int ref)
{
    if (ref >= 0) keep_storage(m, ni, ids[ref]);
    else if (-1 - ref < 8 && m->amp.cast[-1 - ref] >= 0) keep_storage(m, ni, m->amp.cast[-1 - ref]);
    else keep_for_backward(m, ni, n->in[-1 - ref]);
}

static bool chain_rg(const Sim *m, const MeNode *n, const bool *rg, int ref)
{
    if (ref == ME_CHAIN_NONE) return false;
    return ref >= 0 ? rg[ref] : n->in[-1 - ref] >= 0 && m->rg[n->in[-1 - ref]];
}

/* Runs the chain of tensors op n makes inside itself (MeChain, planned by
 * its descriptor): each made in order (in the output's element size) and
 * freed after its last reader, autograd (save: it records the op) keeping
 * what each step saves. Returns the storage output v stands on: the
 * result step's, or the input it views; -1 on failure. */
static int chain_forward(Sim *m, int ni, const MeNode *n, const MeChain *ch, int v, bool save)
{
    int ids[ME_CHAIN_MAX], last[ME_CHAIN_MAX];
    bool rg[ME_CHAIN_MAX];
    int64_t es = m->amp.es ? m->amp.es[v] : me_dtype_size(m->g->v[v].dtype);
    for (int k = 0; k < ch->n; k++) {
        last[k] = k;
        const int8_t ref[2] = { ch->s[k].a, ch->s[k].b };
        for (int j = 0; j < 2; j++)
            if (ref[j] >= 0 && ref[j] < k) last[ref[j]] = k;
    }
    for (int k = 0; k < ch->n; k++) {
        const MeChainStep *s = &ch->s[k];
        int64_t bytes = sat_mul(s->numel, es);
        ids[k] = k == ch->result ? st_make(m, bytes, MEMEST_MEM_ACTIVATIONS, v, false) : st_new(m, bytes, MEMEST_MEM_ACTIVATIONS);
        if (ids[k] < 0) return -1;
        bool ra = chain_rg(m, n, rg, s->a), rb = chain_rg(m, n, rg, s->b);
        rg[k] = ra || rb;
        if (save && s->saves) {
            if (rb && s->a != ME_CHAIN_NONE) chain_keep(m, ni, n, ids, s->a);
            if (ra && s->b != ME_CHAIN_NONE) chain_keep(m, ni, n, ids, s->b);
        }
        const int8_t ref[2] = { s->a, s->b };
        for (int j = 0; j < 2; j++)
            if (ref[j] >= 0 && last[ref[j]] == k && ref[j] != ch->result) st_release(m, ids[ref[j]]);
    }
    for (int k = 0; k < ch->n; k++) /* a step nothing read */
        if (last[k] == k && k != ch->result) st_release(m, ids[k]);
    if (ch->result >= 0) return ids[ch->result];
    int x = n->in[-1 - ch->result];
    return x >= 0 ? m->vst[x] : -1;
}

static void forward_node(Sim *m, int ni, int oi, bool grad, bool redo)
{
    MeGraph *g = m->g;
    const MeNode *n = &g->n[ni];
    m->node = ni;
    bool rg = false;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0 && m->rg[n->in[i]]) rg = true;
    if (n->desc && (n->desc->flags & ME_OPF_NO_GRAD)) rg = false;
    int s = m->ckpt.seg[ni];
    bool core = attn_core(m, n);
    if (m->s->amp && !core) autocast_node(m, n);
    else for (int i = 0; i < 8; i++) m->amp.cast[i] = -1;
    if (attn_ctx(m, n) && m->amp.cast[0] >= 0) {
        st_release(m, m->amp.cast[0]); /* the probabilities it stands on were never made */
        m->amp.cast[0] = -1;
    }
    /* an op PyTorch runs as a chain of calls (torch.einsum): its tensors,
     * the output standing on the last */
    MeChain chain;
    int chained = -1;
    if (!core && n->desc->chain && n->n_out >= 1 && n->out[0] >= 0) {
        MeRunCtx rc = run_ctx(m, n, -1);
        bool rgn = rg && grad;
        if (n->desc->chain(&rc, &chain) && (chained = chain_forward(m, ni, n, &chain, n->out[0], rgn)) < 0) return;
    }
    for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k];
        if (v < 0) continue;
        bool leaves = redo && m->ckpt.ext_uses[v] > 0;
        /* a hook's requires_grad_(True) (llm_build.c: HF's
         * enable_input_require_grads, which gradient checkpointing sets) */
        bool hook = g->v[v].requires_grad && m->s->checkpoint == MEMEST_CHECKPOINT_LAYERS;
        m->rg[v] = grad && (rg || hook) && me_dtype_is_float(g->v[v].dtype);
        bool out = g->v[v].is_output;
        /* extra outputs nobody reads (BatchNorm's running statistics are
         * updated in place; Dropout's mask is kept by autograd) */
        if (k > 0 && !g->v[v].n_uses) continue;
        bool alias = core || ((k == 0 || me_node_is_view(n)) && aliases_input(m, n));
        if (alias && !core && me_node_is_view(n) && !view_result(m, n, k)) alias = false; /* reshape of a strided view copies */
        if (!alias || !me_node_is_view(n)) m->layout.stride_at[v] = -1;
        if (!alias) new_layout(m, n, v);
        if (k == 0 && chained >= 0) alias = false;
        int id = core ? attn_core_storage(m, n)
               : k == 0 && chained >= 0 ? chained
               : alias ? m->vst[n->in[0]]
               : st_make(m, vb(m, &g->v[v]), MEMEST_MEM_ACTIVATIONS, v, false);
        if (id < 0) return;
        if (k == 0 && chained >= 0) set_strides(m, v, chain.strides);
        m->vst[v] = id;
        bind(m, v, id, false);
        if (redo) {
            m->st[id].refs += m->ckpt.own_uses[v];
            if (leaves || out) hold_for_segment(m, s, id);
            else if (m->hold.hold_end[v] > oi && m->hold.hold_end[v] <= m->ckpt.seg_last[s]) {
                /* the recompute runs the segment's Python forwards again:
                 * their frames hold their locals as the first run's did
                 * (PEFT's lora.Linear keeps x while the adapter runs) */
                m->st[id].holds++;
                m->hold.hold_next[v] = m->hold.hold_head[m->hold.hold_end[v]];
                m->hold.hold_head[m->hold.hold_end[v]] = v;
            }
            continue;
        }
        keep_output(m, v, id, oi);
    }
    if (core) {
        /* k.transpose(-2, -1) is the call's operand: kept for it */
        if (n->desc->cls == ME_C_MATMUL && n->n_in == 2 && n->in[1] >= 0 && m->vst[n->in[1]] >= 0) m->st[m->vst[n->in[1]]].holds++;
        end_reads(m, n, redo, s);
        return;
    }
    bool ctx = attn_ctx(m, n);
    int aq = -1, akt = -1; /* the call's q and k.transpose(-2, -1) */
    if (ctx) attn_operands(g, n, &aq, &akt);
    if (ctx && n->out[0] >= 0) attn_out_layout(m, n, aq);
    else if ((n->desc->flags & ME_OPF_SDPA_OUT) && n->out[0] >= 0 && g->v[n->out[0]].shape.rank == 4)
        attn_out_layout(m, n, n->in[0]); /* ONNX's Attention: the call itself */
    if (m->cuda && !m->workspace && gemm_class(n->desc->cls) && !ctx) {
        if (cublas_workspace(m) < 0) return;
        m->workspace = true;
    }
    /* at::matmul (LinearAlgebra.cpp, v1.13) with both operands batched
     * expands each to the broadcast batch (infer_size of the batch dims)
     * and folds it to 3-d with reshape(): a copy when the strides do not
     * allow a view, which an expanded batch dim (stride 0) never does; the
     * copy is of the expanded size (a [1, 576, 10, 16, 8] weight against a
     * batch of 8: 8 copies of it) */
    m->layout.mm_copy[0] = m->layout.mm_copy[1] = -1;
    int64_t batch[ME_MAX_RANK], factor[2];
    int nb = bmm_broadcast(g, n, batch, factor);
    for (int i = 0; nb && i < 2; i++) {
        int v = n->in[i];
        const MeShape *xs = &g->v[v].shape;
        int off = nb - (xs->rank - 2);
        int64_t tmp[ME_MAX_RANK], est[ME_MAX_RANK], fst[ME_MAX_RANK];
        const int64_t *st = m->vst[v] >= 0 ? strides_of(m, v, tmp) : NULL;
        MeShape e = { .rank = nb + 2 }, f = { .rank = 3, .d = { 1, xs->d[xs->rank - 2], xs->d[xs->rank - 1] } };
        for (int j = 0; st && j < nb; j++) {
            int64_t own = j >= off ? xs->d[j - off] : 1;
            e.d[j] = batch[j];
            est[j] = own == batch[j] && j >= off ? st[j - off] : 0; /* expand: stride 0 */
            f.d[0] = sat_mul(f.d[0], batch[j]);
        }
        for (int k = 0; st && k < 2; k++) {
            e.d[nb + k] = xs->d[xs->rank - 2 + k];
            est[nb + k] = st[xs->rank - 2 + k];
        }
        if (st && !me_view_strides(&e, est, &f, fst) &&
            (m->layout.mm_copy[i] = st_new(m, sat_mul(fold_copy_bytes(m, n, i), factor[i]), MEMEST_MEM_ACTIVATIONS)) < 0)
            return;
    }
    /* at::linear (Linear.cpp, v1.13) views a contiguous input as 2-d
     * (_flatten_3d_linear) and otherwise runs matmul, whose reshape()
     * copies an input that strides do not let it view; mm saves the copy.
     * at::matmul itself does the same with a batched left operand and a
     * matrix on the right (a MatMul whose weight the export computes, as
     * nn.MultiheadAttention's split in_proj for cross-attention) */
    if (folds_input(g, n) && n->in[0] >= 0 && m->vst[n->in[0]] >= 0 && g->v[n->in[0]].shape.rank >= 3 && !unfolded_batch(m, n)) {
        const MeShape *xs = &g->v[n->in[0]].shape;
        MeShape f = { .rank = 2, .d = { 1, xs->d[xs->rank - 1] } };
        for (int k = 0; k < xs->rank - 1; k++) f.d[0] = sat_mul(f.d[0], xs->d[k]);
        int64_t fst[ME_MAX_RANK], tmp[ME_MAX_RANK];
        if (!me_view_strides(xs, strides_of(m, n->in[0], tmp), &f, fst) &&
            (m->layout.mm_copy[0] = st_new(m, fold_copy_bytes(m, n, 0), MEMEST_MEM_ACTIVATIONS)) < 0)
            return;
    }
    note(m, ctx ? 0 : sat_add(sat_add(temp_forward(m, n), gathered(m, n)), quant_temp(m, n)));
    if (grad && rg && ctx) attn_saved(m, ni, n, aq, akt);
    else if (grad && rg && chained < 0) record_saved(m, ni, n);
    run(m, ME_TL_RUN_FORWARD, n->n_out && n->out[0] >= 0 ? m->vst[n->out[0]] : -1, -1, -1);
    if (akt >= 0 && m->vst[akt] >= 0) {
        m->st[m->vst[akt]].holds--; /* the call has read k */
        st_release(m, m->vst[akt]);
    }
    for (int i = 0; i < 2; i++)
        if (m->layout.mm_copy[i] >= 0) st_release(m, m->layout.mm_copy[i]);
    for (int i = 0; i < 8; i++)
        if (m->amp.cast[i] >= 0 && (i >= n->n_in || n->in[i] < 0 || m->amp.wcache[n->in[i]] != m->amp.cast[i])) st_release(m, m->amp.cast[i]);
    end_reads(m, n, redo, s);
}

/* bmm's gradient of an operand at::matmul expanded to the broadcast batch
 * is of the expanded size, [batch, n, m]; ExpandBackward's sum_to_size
 * reduces it to the operand's (derivatives.yaml: expand's self:
 * at::sum_to(grad, self.sizes())), so it lives while that runs */
static int64_t bmm_expanded_grad(const Sim *m, const MeNode *n, int i)
{
    int64_t batch[ME_MAX_RANK], factor[2], ub = i == 1 ? unfolded_batch(m, n) : 0;
    if (ub > 1) return sat_mul(vb(m, &m->g->v[n->in[1]]), ub); /* the matrix, expanded to the batch */
    return i < 2 && bmm_broadcast(m->g, n, batch, factor) && factor[i] > 1 ? sat_mul(vb(m, &m->g->v[n->in[i]]), factor[i]) : 0;
}

static void drop_autocast_cache(Sim *m)
{
    for (int v = 0; m->amp.wcache && v < m->g->nv; v++) {
        if (m->amp.wcache[v] < 0) continue;
        m->st[m->amp.wcache[v]].holds--;
        st_release(m, m->amp.wcache[v]);
        m->amp.wcache[v] = -1;
    }
}

/* A node the timeline cannot model: an op the registry does not know, or a
 * known op that runs (not shape arithmetic or a folded constant) and whose
 * shapes are unknown (below an unknown op whose outputs the file gives no
 * shape). Its outputs are allocated from the shapes the file
 * declares or inference found, 0 bytes where none is known (the analysis's
 * note says so); it keeps nothing for backward and passes no gradient. */
static bool opaque(const MeGraph *g, const MeNode *n)
{
    if (!n->desc) return true;
    if (me_node_skipped(g, n)) return false;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] >= 0 && !g->v[n->in[i]].known) return true;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && !g->v[n->out[k]].known) return true;
    return false;
}

/* Python's module scopes let go of the values whose hold ends at oi */
static void release_holds(Sim *m, int oi)
{
    for (int v = m->hold.hold_head[oi]; v >= 0; v = m->hold.hold_next[v]) {
        m->st[m->vst[v]].holds--;
        st_release(m, m->vst[v]);
    }
}

/* Shape and folded arithmetic never read the data: their reads end now */
static void skipped_reads(Sim *m, const MeNode *n)
{
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        if (v < 0 || m->vst[v] < 0) continue;
        m->st[m->vst[v]].refs--;
        st_release(m, m->vst[v]);
    }
}

/* nn.TransformerEncoderLayer under no_grad in eval, batch_first, ReLU or
 * GELU (canon/mha.c marks its scope): torch._transformer_encoder_layer_fwd
 * (aten/src/ATen/native/transformers/transformer.cpp, v1.13) with
 * _native_multi_head_attention. Measured allocation by allocation on the
 * CPU (torch 1.13), with X the input's bytes, S the scores' (B·H·T·T), F
 * the feed-forward hidden's and s a LayerNorm's mean or rstd (one float a
 * row), the live bytes beyond the layer's input step through:
 *   norm_first: LN1 out X (+2s); the [B,T,3E] projection 3X and its
 *     rescaled [3,B,H,T,d] copy 3X (7X), the projection freed; scores S,
 *     softmaxed in place, the context written over q (4X + S); the context
 *     transposed X and projected X (6X); then x1 = X; LN2 out X (+2s);
 *     FFN hidden F and output X (3X + F); x1 added in place: the result X.
 *   post-norm: 3X + 3X (6X); 3X + S; 3X + X + X (5X); x1 and LN1 out
 *     (2X + 2s); hidden and output beside LN1 out (2X + F); LN2 out beside
 *     both (3X + 2s): the result X.
 * Only the layer's result leaves it; nothing else gets a storage. A layer
 * whose nodes are not the shape that op needs (one float [B, T, E] input,
 * one result, a softmax and a linear1) runs as its ops. */
typedef struct LayerScan {
    int x, y, soft, hid; /* input, result, the softmax's and linear1's outputs */
    int64_t head_dim;    /* the last dim of self_attn's [T, B * H, head_dim] views, 0 unseen */
    bool norm_first, bad;
} LayerScan;

static int64_t fused_transient(const Sim *m, const LayerScan *l)
{
    const MeGraph *g = m->g;
    if (l->bad || l->x < 0 || l->y < 0 || l->soft < 0 || l->hid < 0 || g->v[l->x].shape.rank != 3 || g->v[l->x].shape.d[2] <= 0)
        return -1;
    /* the fast path wants an even head count (transformer.py, v1.13: "num_head
     * is odd" disables it); F.multi_head_attention_forward's views
     * [T, B * H, E / H] show E / H, so the heads too */
    if (l->head_dim > 0 && (g->v[l->x].shape.d[2] % l->head_dim || (g->v[l->x].shape.d[2] / l->head_dim) % 2)) return -1;
    int64_t X = vb(m, &g->v[l->x]), S = vb(m, &g->v[l->soft]), F = vb(m, &g->v[l->hid]);
    int64_t st = sat_mul(2 * 4, numel0(&g->v[l->x].shape) / g->v[l->x].shape.d[2]);
    int64_t t[6] = { sat_mul(6, X), sat_add(sat_mul(3, X), S), sat_mul(5, X), /* post-norm */
                     sat_add(sat_mul(2, X), st), sat_add(sat_mul(2, X), F), sat_add(sat_mul(3, X), st) };
    if (l->norm_first) {
        t[0] = sat_add(X, st), t[1] = sat_mul(7, X), t[2] = sat_add(sat_mul(4, X), S);
        t[3] = sat_mul(6, X), t[4] = sat_add(sat_mul(2, X), st), t[5] = sat_add(sat_mul(3, X), F);
    }
    int64_t peak = 0;
    for (int i = 0; i < 6; i++) peak = t[i] > peak ? t[i] : peak;
    return peak;
}

static bool module_is(const MeNode *n, const char *last)
{
    const char *dot = n->module ? strrchr(n->module, '.') : NULL;
    return dot && !strcmp(dot, last);
}

/* The fused layers of this run: none with autograd on, under autocast
 * (the fast path's own condition), or on CUDA (measured on a CPU only).
 * One pass over the scopes (a parent comes before its children) and one
 * over the nodes' edges finds each layer's nodes, input and result. */
static int plan_fused(Sim *m)
{
    MeGraph *g = m->g;
    if (m->grad || m->s->amp || m->s->runtime != MEMEST_RUNTIME_CPU) return 0;
    int nl = 0;
    for (int sc = 0; sc < g->nscopes; sc++) nl += g->scopes[sc].fused_encoder;
    if (!nl) return 0;
    int *lay = me_malloc(sizeof(int) * (size_t)(g->nscopes + 1)); /* scope -> its layer, -1 none */
    LayerScan *ls = me_malloc(sizeof(LayerScan) * (size_t)nl);
    m->fz_of = me_malloc(sizeof(int) * (size_t)(g->nn + 1));
    m->fz = me_calloc((size_t)nl, sizeof(*m->fz));
    int rc = lay && ls && m->fz_of && m->fz ? 0 : ME_ENOMEM;
    for (int sc = 0, k = 0; rc == 0 && sc < g->nscopes; sc++) {
        int p = g->scopes[sc].parent;
        lay[sc] = g->scopes[sc].fused_encoder ? k++ : p >= 0 ? lay[p] : -1;
    }
    for (int k = 0; rc == 0 && k < nl; k++) ls[k] = (LayerScan){ .x = -1, .y = -1, .soft = -1, .hid = -1 };
    for (int ni = 0; rc == 0 && ni < g->nn; ni++)
        m->fz_of[ni] = me_node_is_constant(&g->n[ni]) ? -1 : lay[g->n[ni].scope];
    for (int ni = 0; rc == 0 && ni < g->nn; ni++) {
        const MeNode *n = &g->n[ni];
        int l = m->fz_of[ni];
        for (int i = 0; i < n->n_in; i++) {
            int v = n->in[i], p = v >= 0 ? g->v[v].producer : -1, lp = p >= 0 ? m->fz_of[p] : -1;
            if (v < 0 || lp == l) continue;
            if (lp >= 0) { /* a layer's value read outside it: its result */
                ls[lp].bad |= ls[lp].y >= 0 && ls[lp].y != v;
                ls[lp].y = v;
            }
            bool data = g->v[v].kind != ME_V_INIT && !g->v[v].has_val && me_dtype_is_float(g->v[v].dtype) &&
                        !(p >= 0 && me_node_is_constant(&g->n[p]));
            if (l >= 0 && data) { /* read from outside: the layer's input */
                ls[l].bad |= ls[l].x >= 0 && ls[l].x != v;
                ls[l].x = v;
                ls[l].norm_first |= module_is(n, ".norm1");
            }
        }
        if (l < 0) continue;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && g->v[n->out[k]].is_output) {
                ls[l].bad |= ls[l].y >= 0 && ls[l].y != n->out[k];
                ls[l].y = n->out[k];
            }
        if (n->desc && n->desc->cls == ME_C_SOFTMAX) ls[l].soft = n->out[0];
        /* q, k and v's [T, B * H, E / H]: the narrowest of the layer's
         * three-dim views (its output's [T, B, E] is one too) */
        if ((n->flags & ME_N_CONTIGUOUS) && n->n_out && n->out[0] >= 0 && g->v[n->out[0]].shape.rank == 3 &&
            g->v[n->out[0]].shape.d[2] > 0 && (!ls[l].head_dim || g->v[n->out[0]].shape.d[2] < ls[l].head_dim))
            ls[l].head_dim = g->v[n->out[0]].shape.d[2];
        if (n->desc && n->desc->cls == ME_C_LINEAR && module_is(n, ".linear1")) ls[l].hid = n->out[0];
    }
    for (int k = 0; rc == 0 && k < nl; k++)
        m->fz[k] = (struct Fused){ .out = ls[k].y, .transient = fused_transient(m, &ls[k]) };
    for (int ni = 0; rc == 0 && ni < g->nn; ni++)
        if (m->fz_of[ni] >= 0 && m->fz[m->fz_of[ni]].transient < 0) m->fz_of[ni] = -1; /* runs as its ops */
    me_free(lay);
    me_free(ls);
    return rc;
}

/* Node ni's outputs made as plain tensors without autograd (all of them,
 * or only value `only`: a fused layer's result), then its reads end. */
static void plain_outputs(Sim *m, int ni, int oi, int only)
{
    MeGraph *g = m->g;
    const MeNode *n = &g->n[ni];
    m->node = ni;
    for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k];
        if (v < 0) continue;
        m->rg[v] = false;
        m->layout.stride_at[v] = -1;
        if (only >= 0 && v != only) continue;
        int id = st_make(m, vb(m, &g->v[v]), MEMEST_MEM_ACTIVATIONS, v, false);
        if (id < 0) return;
        m->vst[v] = id;
        bind(m, v, id, false);
        keep_output(m, v, id, oi);
    }
    note(m, 0);
    skipped_reads(m, n);
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && (only < 0 || n->out[k] == only)) st_release(m, m->vst[n->out[k]]);
}

static void forward_opaque(Sim *m, int ni, int oi) { plain_outputs(m, ni, oi, -1); }

/* A node of a fused layer: the layer's peak at its first node, its result
 * made where the file makes it */
static void fused_node(Sim *m, int ni, int oi)
{
    struct Fused *f = &m->fz[m->fz_of[ni]];
    m->node = ni;
    if (!f->started) {
        f->started = true;
        note(m, f->transient);
    }
    plain_outputs(m, ni, oi, f->out);
}

static void forward(Sim *m)
{
    MeGraph *g = m->g;
    m->phase = MEMEST_PHASE_FORWARD;
    if (plan_fused(m) < 0) {
        m->failed = true;
        return;
    }
    for (int oi = 0; oi < g->nn && !m->failed; oi++) {
        int ni = g->order[oi];
        const MeNode *n = &g->n[ni];
        if (m->fz_of && m->fz_of[ni] >= 0) {
            fused_node(m, ni, oi);
            release_holds(m, oi);
            continue;
        }
        if (opaque(g, n)) {
            forward_opaque(m, ni, oi);
            release_holds(m, oi);
            continue;
        }
        if (me_node_skipped(g, n)) {
            skipped_reads(m, n);
            release_holds(m, oi);
            continue;
        }
        int s = m->ckpt.seg[ni];
        if (s >= 0 && m->ckpt.seg_first[s] == oi) {
            /* checkpoint() keeps the segment's inputs for the recompute */
            for (int pj = oi; pj <= m->ckpt.seg_last[s]; pj++) {
                const MeNode *x = &g->n[g->order[pj]];
                for (int i = 0; i < x->n_in; i++) {
                    int v = x->in[i];
                    if (v >= 0 && m->vst[v] >= 0 && (g->v[v].producer < 0 || m->ckpt.seg[g->v[v].producer] != s))
                        hold_for_segment(m, s, m->vst[v]);
                }
            }
        }
        forward_node(m, ni, oi, m->grad && s < 0, false);
        if (s >= 0 && m->ckpt.seg_last[s] == oi && m->grad) {
            /* the segment's outputs require grad when one of its inputs does */
            bool any = false;
            for (int pj = m->ckpt.seg_first[s]; pj <= oi; pj++) {
                const MeNode *x = &g->n[g->order[pj]];
                for (int i = 0; i < x->n_in; i++) {
                    int v = x->in[i];
                    if (v >= 0 && (g->v[v].producer < 0 || m->ckpt.seg[g->v[v].producer] != s) && m->rg[v]) any = true;
                }
            }
            for (int pj = m->ckpt.seg_first[s]; pj <= oi; pj++) {
                const MeNode *x = &g->n[g->order[pj]];
                for (int k = 0; k < x->n_out; k++)
                    if (x->out[k] >= 0 && m->ckpt.ext_uses[x->out[k]] > 0)
                        m->rg[x->out[k]] = any && me_dtype_is_float(g->v[x->out[k]].dtype);
            }
        }
        release_holds(m, oi);
    }
}

/* Backward reached checkpointed segment s: run its forward again with
 * autograd on, so its own backward can follow. */
static void recompute(Sim *m, int s)
{
    MeGraph *g = m->g;
    m->ckpt.seg_redone[s] = true;
    /* the first run released these lists; the recompute's own holds
     * (forward_node) fill them again, the segment's inputs being held by
     * hold_for_segment instead */
    for (int oi = m->ckpt.seg_first[s]; oi <= m->ckpt.seg_last[s]; oi++) m->hold.hold_head[oi] = -1;
    for (int oi = m->ckpt.seg_first[s]; oi <= m->ckpt.seg_last[s] && !m->failed; oi++) {
        int ni = g->order[oi];
        if (me_node_skipped(g, &g->n[ni])) {
            /* as forward(); no reads to end: own_uses counts only
             * readers that run */
            release_holds(m, oi);
            continue;
        }
        if (opaque(g, &g->n[ni])) {
            release_holds(m, oi);
            continue;
        }
        forward_node(m, ni, oi, true, true);
        release_holds(m, oi);
        MeCtx c = { .g = g, .n = &g->n[ni] };
        MeCost co;
        me_convention_cost(MEMEST_CONVENTION_DEFAULT, &c, &co);
        m->out->recompute_macs = me_sadd(m->out->recompute_macs, co.macs);
    }
}

/* A second gradient for a tensor that already has one: autograd's
 * InputBuffer (torch 1.13) computes old + new out of place, so old, new and
 * their sum are alive together for a moment; the sum replaces old. new_id
 * is the running node's output gradient passed through for its input
 * `through`, or (-1) a storage made for vi. */
static void sum_grads(Sim *m, int vi, int new_id, int through)
{
    int old = m->vgrad[vi];
    /* the sum has the tensor's size, whatever storage old is a view of
     * (Concat's backward hands out slices of one big gradient) */
    int sum = st_make(m, vb(m, &m->g->v[vi]), MEMEST_MEM_ACT_GRADS, vi, true);
    if (sum < 0) return;
    MeTlEvent r = me_tl_event(ME_TL_RUN);
    r.run = ME_TL_RUN_GRAD_SUM;
    r.storage = sum;
    r.accum = old;
    r.gout = new_id;
    r.value = vi;
    r.through = through >= 0;
    r.input = through;
    note_run(m, 0, &r);
    m->st[sum].holds = 1;
    m->vgrad[vi] = sum;
    m->grows[vi] = 0;
    bind(m, vi, sum, true);
    m->st[old].holds--;
    st_release(m, old);
    st_release(m, new_id);
}

/* A strided output gradient that node n passes on unchanged stays the
 * same view: a view op's backward is a view of it (ViewBackward0's
 * grad.reshape(), squeeze/unsqueeze), AddBackward0 and an identity
 * Dropout return it as it is. A permute's is strided another way, which
 * nothing here reads: 0. */
static int64_t passed_rows(const Sim *m, const MeNode *n)
{
    if (n->n_out < 1 || n->out[0] < 0 || n->desc->view == ME_VIEW_PERMUTE) return 0;
    return m->grows[n->out[0]];
}

/* Reshape's backward, grad.reshape(input sizes), on a strided [P, rest]
 * gradient is a view only when the input's leading dims make P rows
 * (TensorShape.cpp reshape: computeStride); otherwise it copies, and the
 * input's gradient is a contiguous tensor of its own (measured: a
 * Linear's 3-d output, a slice of a Concat past dim 0, copied in
 * ViewBackward0). */
static bool reshape_grad_copies(const Sim *m, const MeNode *n, int i)
{
    if (n->desc->view != ME_VIEW_RESHAPE || n->out[0] < 0 || m->grows[n->out[0]] <= 0) return false;
    const MeShape *x = &m->g->v[n->in[i]].shape;
    int64_t p = 1, rows = m->grows[n->out[0]];
    for (int k = 0; k < x->rank && p < rows; k++)
        if (x->d[k] < 0 || !me_mul64(p, x->d[k], &p)) return false;
    return p != rows;
}

/* The copy a backward kernel makes of a strided output gradient
 * (ME_OPF_GRAD_CONTIG), alive while it runs. conv.c's CPU phases place
 * the convolution's own. */
static int64_t grad_contig_copy(const Sim *m, const MeNode *n)
{
    if (n->n_out < 1 || n->out[0] < 0 || m->grows[n->out[0]] <= 0) return 0;
    const MeValue *o = &m->g->v[n->out[0]];
    if ((n->desc->flags & ME_OPF_FOLD_INPUT) && o->shape.rank >= 3) {
        /* at::linear's result.view() of its 2-d product: ViewBackward0
         * reshapes the gradient to those rows, a copy unless they are the
         * strided rows (measured, tests/oracle/measure_strided_grad.py) */
        int64_t rows = 1;
        for (int k = 0; k + 1 < o->shape.rank; k++)
            if (o->shape.d[k] < 0 || !me_mul64(rows, o->shape.d[k], &rows)) return 0;
        return rows != m->grows[n->out[0]] ? vb(m, o) : 0;
    }
    if (!(n->desc->flags & ME_OPF_GRAD_CONTIG)) return 0;
    if (n->desc->cls == ME_C_CONV && m->s->runtime == MEMEST_RUNTIME_CPU) return 0;
    return vb(m, o);
}

/* Links value vi's gradient to storage id, made by the running node for
 * its input i (the node's output gradient passed through, when through).
 * A value that has a gradient already waits: the engine's
 * evaluate_function (torch/csrc/autograd/engine.cpp, v1.13) calls the
 * node's backward for all its inputs, lets go of the node's incoming
 * gradients and saved tensors (call_function's moved-in inputs,
 * release_variables), and only then adds each result into the next
 * node's InputBuffer, out of place (measured: aten::add after the last
 * input's gradient, the weight's included). sum_pending does it there. */
static void give_grad(Sim *m, int vi, int id, int i, bool through)
{
    if (m->vgrad[vi] >= 0) {
        if (me_grow_raw(&m->pend, &m->cap_pend, m->npend + 1, sizeof(*m->pend)) < 0) {
            m->failed = true;
            return;
        }
        m->pend[m->npend++] = (struct PendingSum){ .value = vi, .storage = id, .through = through ? i : -1 };
        m->st[id].holds++; /* the node's result, waiting */
        return;
    }
    if (!through) {
        m->vgrad[vi] = id;
        m->grows[vi] = 0;
        m->st[id].holds = 1;
        bind(m, vi, id, true);
        return;
    }
    const MeNode *n = &m->g->n[m->node];
    MeCtx c = { .g = m->g, .n = (MeNode *)n };
    m->vgrad[vi] = id;
    m->grows[vi] = n->desc && n->desc->grad_strided ? n->desc->grad_strided(&c, i) : passed_rows(m, n);
    m->st[id].holds++;
    if (!heard(m, ME_TL_BIND)) return; /* as bind(): the statistics do not hear it */
    MeTlEvent e = me_tl_event(ME_TL_BIND);
    e.value = vi;
    e.storage = id;
    e.grad = e.through = true;
    e.input = i;
    emit(m, &e);
}

/* The sums give_grad deferred, in input order, as the engine adds them */
static void sum_pending(Sim *m)
{
    for (int k = 0; k < m->npend && !m->failed; k++) {
        struct PendingSum *p = &m->pend[k];
        m->st[p->storage].holds--;
        sum_grads(m, p->value, p->storage, p->through);
    }
    m->npend = 0;
}

bool me_passes_grad_through(const MeGraph *g, const MeNode *n, int i, bool train)
{
    switch (n->desc->grad_through) {
    case ME_GT_ALL:
        return true;
    case ME_GT_FIRST_SAME_SIZE:
        if (i) return false;
        /* fall through */
    case ME_GT_SAME_SIZE: {
        /* same shape: the output gradient itself; broadcast: summed down */
        if (n->out[0] < 0) return false;
        const MeValue *x = &g->v[n->in[i]], *o = &g->v[n->out[0]];
        return me_shape_numel(&x->shape) == me_shape_numel(&o->shape);
    }
    case ME_GT_NO:
        break;
    }
    return n->desc->cls == ME_C_DROPOUT && me_dropout_identity(g, n, train);
}

/* The SDPA call's backward (attn_ctx) makes q's and k's gradients beside
 * v's (the loop's), with a [B*H, T] fp32 delta (grad_out * out summed over
 * head_dim: _efficient_attention_backward, the flash kernels' softmax_d)
 * while it runs; k's lands on k.transpose(-2, -1), whose backward passes
 * it on. The core ops after it get no gradient, so they never run. */
static int attn_grads(Sim *m, const MeNode *n, int gout)
{
    int ops[2];
    attn_operands(m->g, n, &ops[0], &ops[1]);
    int64_t delta = attn_lse_bytes(m, n, ops[0]);
    for (int k = 0; k < 2; k++) {
        int v = ops[k];
        if (v < 0 || !m->rg[v] || m->vst[v] < 0) continue;
        int id = st_make(m, vb(m, &m->g->v[v]), MEMEST_MEM_ACT_GRADS, v, true);
        if (id < 0) return -1;
        MeTlEvent r = me_tl_event(ME_TL_RUN);
        r.run = ME_TL_RUN_BACKWARD;
        r.input = 0;
        r.value = v;
        r.gout = gout;
        r.storage = id;
        note_run(m, delta, &r);
        give_grad(m, v, id, 0, false);
    }
    return 0;
}

/* Bytes of the output-sized tensors a binary op's backward makes for
 * broadcast input i's gradient before the engine sums it down (the
 * descriptor's bcast_full: how many), 0 when input i is not broadcast */
static int64_t bcast_grad_full(const Sim *m, const MeNode *n, int i, int *count)
{
    *count = 0;
    if (i > 1 || !n->desc->bcast_full[i] || n->out[0] < 0 || n->in[i] < 0) return 0;
    const MeValue *x = &m->g->v[n->in[i]], *o = &m->g->v[n->out[0]];
    if (me_shape_numel(&x->shape) >= me_shape_numel(&o->shape)) return 0;
    *count = n->desc->bcast_full[i];
    return vb(m, o);
}

/* A piece of a chunk the export wrote as Slices (canon/split.c): PyTorch's
 * SplitBackward0 runs once, when every piece's gradient is there, and cats
 * them into one gradient of the input (split_backward); the pieces'
 * gradients live until then. Returns false: not such a piece here. */
static bool split_piece_backward(Sim *m, const MeNode *n)
{
    int x = n->in[0], o = n->out[0];
    if (!(n->flags & ME_N_SPLIT_PIECE) || !m->split_left || x < 0 || o < 0) return false;
    if (m->vgrad[o] >= 0) { /* held for the cat */
        m->split_next[o] = m->split_head[x];
        m->split_head[x] = o;
    }
    if (--m->split_left[x] > 0 || m->split_head[x] < 0) return true;
    if (m->rg[x]) {
        int id = st_make(m, vb(m, &m->g->v[x]), MEMEST_MEM_ACT_GRADS, x, true);
        if (id < 0) return true;
        MeTlEvent r = me_tl_event(ME_TL_RUN);
        r.run = ME_TL_RUN_BACKWARD;
        r.input = 0;
        r.value = x;
        r.gout = m->vgrad[o] >= 0 ? m->vgrad[o] : -1;
        r.storage = id;
        note_run(m, 0, &r);
        give_grad(m, x, id, 0, false);
    }
    for (int v = m->split_head[x]; v >= 0; v = m->split_next[v]) {
        int id = m->vgrad[v];
        m->vgrad[v] = -1;
        m->st[id].holds--;
        st_release(m, id);
    }
    m->split_head[x] = -1;
    return true;
}

/* The pieces of each chunk whose backward will run (split_piece_backward) */
static int split_setup(Sim *m)
{
    const MeGraph *g = m->g;
    bool any = false;
    for (int i = 0; i < g->nn && !any; i++) any = (g->n[i].flags & ME_N_SPLIT_PIECE) != 0;
    if (!any) return 0;
    size_t nv = (size_t)g->nv + 1;
    if (!m->split_left) {
        m->split_left = me_malloc(sizeof(int) * nv);
        m->split_head = me_malloc(sizeof(int) * nv);
        m->split_next = me_malloc(sizeof(int) * nv);
        if (!m->split_left || !m->split_head || !m->split_next) return ME_ENOMEM;
    }
    for (int v = 0; v < g->nv; v++) m->split_left[v] = 0, m->split_head[v] = m->split_next[v] = -1;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if ((n->flags & ME_N_SPLIT_PIECE) && n->in[0] >= 0 && n->out[0] >= 0 && !me_node_skipped(g, n) && !opaque(g, n)) m->split_left[n->in[0]]++;
    }
    return 0;
}

static void backward(Sim *m, int *param_grad_st)
{
    MeGraph *g = m->g;
    m->phase = MEMEST_PHASE_BACKWARD;
    int exp_leaf[2], exp_st[2], nexp = 0; /* leaves whose .grad an ExpandBackward makes after the node */
    int tie_st[4], ntie = 0;              /* a shared parameter's new gradients, added into .grad after the node */
    if (split_setup(m) < 0) {
        m->failed = true;
        return;
    }
    for (int oi = g->nn - 1; oi >= 0 && !m->failed; oi--) {
        int ni = g->order[oi];
        const MeNode *n = &g->n[ni];
        m->node = ni;
        if (me_node_skipped(g, n) || opaque(g, n)) continue;
        int s = m->ckpt.seg[ni];
        if (s >= 0 && !m->ckpt.seg_redone[s]) {
            recompute(m, s);
            m->node = ni;
        }
        bool has_grad = false;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && m->vgrad[n->out[k]] >= 0) has_grad = true;
        bool piece = split_piece_backward(m, n);
        int bc_node[2], nbc_node = 0; /* broadcast inputs' gradients at the output's size, until the node's end */
        if (!piece && has_grad && requires_grad_any_out(m, n)) {
            if (m->cuda && !m->bwd_workspace && gemm_class(n->desc->cls)) {
                if (cublas_workspace(m) < 0) return;
                m->bwd_workspace = true;
            }
            int gout = n->out[0] >= 0 ? m->vgrad[n->out[0]] : -1;
            nexp = ntie = 0;
            int64_t tmp_node = sat_add(sat_add(gathered(m, n), quant_temp_backward(m, n)), grad_contig_copy(m, n));
            if (attn_ctx(m, n) && attn_grads(m, n, gout) < 0) return;
            for (int i = 0; i < n->n_in; i++) {
                int v = n->in[i];
                bool dup = false;
                for (int j = 0; j < i; j++) dup |= n->in[j] == v;
                if (v < 0 || dup || !m->rg[v] || (i == 0 && attn_ctx(m, n))) continue;
                int64_t own = sat_add(tmp_node, temp_backward(m, n, i)), eb = bmm_expanded_grad(m, n, i);
                int64_t tmp = attn_ctx(m, n) ? 0 : sat_add(own, eb);
                int nfull;
                int64_t full = bcast_grad_full(m, n, i, &nfull);
                if (nfull > 0 && nbc_node < 2) {
                    /* the formula's result lives until validate_outputs sums it
                     * down after the node ran; its other temporaries not */
                    if ((bc_node[nbc_node] = st_new(m, full, MEMEST_MEM_ACT_GRADS)) < 0) return;
                    nbc_node++;
                    tmp = sat_add(tmp, sat_mul(full, nfull - 1));
                }
                const MeValue *val = &g->v[v];
                /* input i's gradient computed */
                MeTlEvent r = me_tl_event(ME_TL_RUN);
                r.run = ME_TL_RUN_BACKWARD;
                r.input = i;
                r.value = v;
                r.gout = gout;
                if (val->kind == ME_V_INIT || val->kind == ME_V_INPUT) { /* a leaf: its gradient becomes .grad */
                    if (eb > 0 && param_grad_st[v] < 0 && !m->dp.offload && m->dp.ranks < 2 && nexp < 2) {
                        /* bmm's gradient of the expanded leaf is made here;
                         * ExpandBackward's sum_to, a node of its own, makes
                         * the leaf's after the engine has released bmm's
                         * saved tensors (engine.cpp evaluate_function:
                         * release_variables once the node ran) */
                        int e = st_new(m, eb, MEMEST_MEM_ACT_GRADS);
                        if (e < 0) return;
                        r.storage = e;
                        note_run(m, own, &r);
                        exp_leaf[nexp] = v;
                        exp_st[nexp++] = e;
                        continue;
                    }
                    if (param_grad_st[v] < 0) {
                        int64_t gb = vb(m, val);
                        if (m->dp.ranks > 1 && m->dp.shard >= MEMEST_SHARD_ZERO2 && val->kind == ME_V_INIT) gb = sat_add(gb, m->dp.ranks - 1) / m->dp.ranks; /* reduce-scattered */
                        if (m->dp.offload && val->kind == ME_V_INIT) tmp = sat_add(tmp, vb(m, val)), gb = 0; /* offload_grad: moved to the bucket at once */
                        int id = st_make(m, gb, MEMEST_MEM_GRADIENTS, v, true);
                        if (id < 0) return;
                        m->st[id].persistent = true;
                        param_grad_st[v] = id;
                        r.storage = id;
                        note_run(m, tmp, &r);
                    } else {
                        /* a shared (tied) parameter: its gradients meet in
                         * the InputBuffer as old + new before .grad. The
                         * engine adds a node's outputs into their buffers
                         * after it has released the node's saved tensors
                         * (engine.cpp evaluate_function: release_variables,
                         * then input_buffer.add): the new one lives until
                         * then, and the sum is made there */
                        int64_t gb = m->dp.offload ? vb(m, val) : m->st[param_grad_st[v]].bytes;
                        r.accum = param_grad_st[v];
                        if (ntie < 4) {
                            int e = st_new(m, gb, MEMEST_MEM_GRADIENTS);
                            if (e < 0) return;
                            r.storage = e;
                            note_run(m, tmp, &r);
                            tie_st[ntie++] = e;
                            continue;
                        }
                        r.storage = -2;
                        note_run(m, sat_add(tmp, gb), &r);
                        note(m, sat_mul(2, gb));
                    }
                    continue;
                }
                if (gout >= 0 && me_passes_grad_through(g, n, i, train_mode(m)) && !reshape_grad_copies(m, n, i)) {
                    give_grad(m, v, gout, i, true);
                    continue;
                }
                int id = st_make(m, vb(m, val), MEMEST_MEM_ACT_GRADS, v, true);
                if (id < 0) return;
                r.storage = id;
                note_run(m, tmp, &r);
                give_grad(m, v, id, i, false);
            }
        }
        for (int k = 0; k < nbc_node; k++) st_release(m, bc_node[k]);
        for (int k = 0; k < n->n_out && !piece; k++) {
            int v = n->out[k];
            if (v < 0 || m->vgrad[v] < 0) continue;
            int id = m->vgrad[v];
            m->vgrad[v] = -1;
            m->st[id].holds--;
            st_release(m, id);
        }
        for (int e = m->saved.saved_head[ni]; e >= 0; e = m->saved.links[e].next) {
            int id = m->saved.links[e].id;
            m->st[id].holds--;
            st_release(m, id);
        }
        m->saved.saved_head[ni] = -1;
        for (int k = 0; k < ntie; k++) { /* old + new: the sum beside the new one, which then goes */
            note(m, m->st[tie_st[k]].bytes);
            st_release(m, tie_st[k]);
        }
        ntie = 0;
        for (int k = 0; k < nexp; k++) { /* ExpandBackward: sum_to into the leaf's .grad */
            int v = exp_leaf[k], id = st_make(m, vb(m, &g->v[v]), MEMEST_MEM_GRADIENTS, v, true);
            if (id < 0) return;
            m->st[id].persistent = true;
            param_grad_st[v] = id;
            MeTlEvent r = me_tl_event(ME_TL_RUN);
            r.run = ME_TL_RUN_BACKWARD;
            r.value = v;
            r.storage = id;
            r.gout = exp_st[k];
            note_run(m, 0, &r);
            st_release(m, exp_st[k]);
        }
        nexp = 0;
        if (s >= 0 && m->ckpt.seg_first[s] == oi) release_segment(m, s);
        sum_pending(m);
    }
}

/* Segments for checkpointing. Cuts go near k·N/S of the N run-time nodes,
 * moved to the nearest point where a single tensor crosses (a block
 * boundary), as checkpoint_sequential's callers choose modules. */
static int plan_segments(Sim *m)
{
    MeGraph *g = m->g;
    for (int i = 0; i < g->nn; i++) m->ckpt.seg[i] = -1;
    int *rt = me_malloc(sizeof(int) * (size_t)(g->nn + 1)); /* runtime index → order position */
    int *ri = me_malloc(sizeof(int) * (size_t)(g->nn + 1)); /* node → runtime index */
    int *cross = me_calloc((size_t)g->nn + 2, sizeof(int));
    int *cuts = NULL, rc = 0, n = 0;
    if (!rt || !ri || !cross) { rc = ME_ENOMEM; goto end; }
    for (int oi = 0; oi < g->nn; oi++) {
        int ni = g->order[oi];
        ri[ni] = -1;
        if (!me_node_skipped(g, &g->n[ni])) { ri[ni] = n; rt[n++] = oi; }
    }
    int want = m->s->checkpoint;
    if (want == -1 || want > 1) {
        if (want > n) want = n;
        /* cross[p]: values made before runtime index p and read at or after it */
        for (int v = 0; v < g->nv; v++) {
            int p = g->v[v].producer;
            if (p < 0 || ri[p] < 0) continue;
            int last = g->v[v].is_output ? n : ri[p];
            cross[ri[p] + 1]++;
            m->ckpt.own_uses[v] = last; /* reused below as scratch: last reader */
        }
        for (int i = 0; i < g->nn; i++) {
            const MeNode *x = &g->n[i];
            if (ri[i] < 0) continue;
            for (int k = 0; k < x->n_in; k++) {
                int v = x->in[k];
                if (v >= 0 && g->v[v].producer >= 0 && ri[g->v[v].producer] >= 0 && ri[i] > m->ckpt.own_uses[v]) m->ckpt.own_uses[v] = ri[i];
            }
        }
        for (int v = 0; v < g->nv; v++) {
            int p = g->v[v].producer;
            if (p < 0 || ri[p] < 0) continue;
            cross[m->ckpt.own_uses[v] + 1]--;
        }
        for (int p = 1; p <= n; p++) cross[p] += cross[p - 1];
        if (want == -1) {
            /* Chen et al.: sqrt(N) segments of a chain of N layers; the layers
             * are the places a single tensor crosses (block boundaries) */
            int layers = 0;
            for (int p = 1; p < n; p++) layers += cross[p] == 1;
            if (layers < 4) layers = n;
            want = 1;
            while ((want + 1) * (want + 1) <= layers) want++;
        }
        if (want < 2 || n < 2) goto count;
        if (!(cuts = me_malloc(sizeof(int) * (size_t)(want + 1)))) { rc = ME_ENOMEM; goto end; }
        int nc = 0, win = n / (2 * want);
        for (int k = 1; k < want; k++) {
            int ideal = (int)((int64_t)k * n / want), best = ideal;
            for (int d = 0; d <= win; d++) {
                if (ideal - d > 0 && cross[ideal - d] == 1) { best = ideal - d; break; }
                if (ideal + d < n && cross[ideal + d] == 1) { best = ideal + d; break; }
            }
            if (!nc || best > cuts[nc - 1]) cuts[nc++] = best;
        }
        /* the last segment runs normally */
        int start = 0;
        for (int k = 0; k < nc; k++) {
            for (int r = start; r < cuts[k]; r++) m->ckpt.seg[g->order[rt[r]]] = m->ckpt.nseg;
            m->ckpt.seg_first[m->ckpt.nseg] = rt[start];
            m->ckpt.seg_last[m->ckpt.nseg] = rt[cuts[k] - 1];
            m->ckpt.nseg++;
            start = cuts[k];
        }
    } else if (want == MEMEST_CHECKPOINT_LAYERS || want == MEMEST_CHECKPOINT_SELECTIVE) {
        /* each checkpoint unit (a scope the loader marked: an HF decoder
         * layer, or for selective recompute a layer's core attention) is
         * one torch.utils.checkpoint call, the last one too */
        bool core = want == MEMEST_CHECKPOINT_SELECTIVE;
        int prev = -1;
        for (int r = 0; r < n; r++) {
            int ni = g->order[rt[r]], u = g->n[ni].scope;
            while (u >= 0 && !(core ? g->scopes[u].ckpt_core : g->scopes[u].ckpt_unit)) u = g->scopes[u].parent;
            if (u >= 0 && u != prev) m->ckpt.seg_first[m->ckpt.nseg++] = rt[r];
            if (u >= 0) {
                m->ckpt.seg[ni] = m->ckpt.nseg - 1;
                m->ckpt.seg_last[m->ckpt.nseg - 1] = rt[r];
            }
            prev = u;
        }
    } else if (m->s->checkpoint == 0) {
        /* JSON: consecutive layers flagged "checkpoint" form a segment */
        for (int r = 0; r < n; r++) {
            int ni = g->order[rt[r]];
            if (!(g->n[ni].flags & ME_N_CHECKPOINT)) continue;
            bool cont = r > 0 && (g->n[g->order[rt[r - 1]]].flags & ME_N_CHECKPOINT);
            if (!cont) m->ckpt.seg_first[m->ckpt.nseg++] = rt[r];
            m->ckpt.seg[ni] = m->ckpt.nseg - 1;
            m->ckpt.seg_last[m->ckpt.nseg - 1] = rt[r];
        }
    }
count:
    /* readers inside the producer's own segment */
    for (int v = 0; v < g->nv; v++) m->ckpt.own_uses[v] = m->ckpt.ext_uses[v] = 0;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *x = &g->n[i];
        if (me_node_skipped(g, x)) continue;
        for (int k = 0; k < x->n_in; k++) {
            int v = x->in[k];
            if (v < 0 || g->v[v].producer < 0) continue;
            if (m->ckpt.seg[i] >= 0 && m->ckpt.seg[g->v[v].producer] == m->ckpt.seg[i]) m->ckpt.own_uses[v]++;
            else m->ckpt.ext_uses[v]++;
        }
    }
    m->out->segments = m->ckpt.nseg;
end:
    me_free(rt);
    me_free(ri);
    me_free(cross);
    me_free(cuts);
    return rc;
}

/* A parameter as the optimizer sees it (optim.h): its bytes in this
 * simulation, rows and columns of Adafactor's factored state. */
static MeOptParam opt_param(const Sim *m, const MeValue *v)
{
    MeOptParam p = { .numel = numel0(&v->shape), .bytes = vb(m, v) };
    if (v->shape.rank >= 2 && p.numel > 0) {
        int r = v->shape.rank;
        p.rows = p.numel / v->shape.d[r - 1];
        p.cols = p.numel / v->shape.d[r - 2];
    }
    return p;
}

/* The single-tensor update's largest temporaries (MeOptimizer.temps), its
 * parameters taken as the forward first reads them: module order, whatever
 * order an exporter listed the initializers in; each update holds the
 * previous parameter's result. Each runs on this rank's shard. -1: out of
 * memory. */
static int64_t update_temps(const Sim *m, const MeOptimizer *od, int ranks)
{
    const MeGraph *g = m->g;
    bool *done = me_calloc((size_t)g->nv + 1, sizeof(bool));
    if (!done) return -1;
    int64_t most = 0;
    MeOptParam prev = { 0 };
    bool any = false;
    /* in run order, each node's inputs in slot order; then any parameter no node reads */
    for (int oi = 0; oi <= g->nn; oi++) {
        const MeNode *n = oi < g->nn ? &g->n[g->order[oi]] : NULL;
        for (int k = 0; k < (n ? n->n_in : g->nv); k++) {
            int v = n ? n->in[k] : k;
            if (v < 0 || done[v] || g->v[v].kind != ME_V_INIT || !g->v[v].n_uses || !m->rg[v]) continue;
            done[v] = true;
            MeOptParam p = opt_param(m, &g->v[v]);
            if (ranks > 1) p.numel = (p.numel + ranks - 1) / ranks, p.bytes = sat_add(p.bytes, ranks - 1) / ranks;
            int64_t t = od->temps(&p, any ? &prev : NULL);
            if (t > most) most = t;
            prev = p, any = true;
        }
    }
    me_free(done);
    return most;
}

static int run_step_events(const MemestModel *model, const MemestMemorySettings *s, MemestMemory *out, char *err, size_t errlen,
                           MeMemResult *rec, int slot, const MeTlSink *extra, const MemestMemory *prev, const int *holds);

/* What one micro-batch holds for its backward when its forward returns
 * (MemestMemory.forward_end, the pipeline's in-flight unit): the bytes
 * alive above the baseline, and the graph inputs that require grad (a
 * pipeline stage's received hidden states, kept in Megatron's
 * input_tensors until that micro-batch's backward). */
static uint64_t forward_held(const Sim *m, const MeTlStats *stats)
{
    int64_t held = stats->total - (int64_t)m->out->baseline;
    for (int i = 0; i < m->g->nv; i++)
        if (m->g->v[i].kind == ME_V_INPUT && m->rg[i] && m->vst[i] >= 0) held = sat_add(held, m->st[m->vst[i]].bytes);
    return held > 0 ? (uint64_t)held : 0;
}

/* The optimizer's state, persistent from now on: one storage through the
 * allocator, one in unified memory (paged) when there is some. The first
 * storage (the update reads it), -1 when none, -2 when out of memory. */
static int opt_state_new(Sim *m, int64_t bytes, int64_t paged)
{
    int id = -1, p;
    if (bytes && (id = st_new(m, bytes, MEMEST_MEM_OPTIMIZER)) < 0) return -2;
    if (bytes) m->st[id].persistent = true;
    if (paged && (p = st_new(m, paged, MEMEST_MEM_OPTIMIZER_PAGED)) < 0) return -2;
    if (paged) m->st[p].persistent = true;
    return id;
}

/* ZeRO-Offload (DeepSpeed stage_1_and_2.py / stage3.py with
 * offload_optimizer device cpu): on this rank's host, its partition of the
 * flattened parameters (1/ranks of all, one flat tensor,
 * single_partition_of_fp32_groups) as fp32 master weights, their fp32
 * gradient (single_grad_partition) and the optimizer's state for that flat
 * tensor; the GPU's gradient buffers are sized from the largest parameter
 * and the sum of all. */
typedef struct OffloadGrads {
    int64_t largest, numel, bytes;
} OffloadGrads;

static int64_t offload_host(const MeOptimizer *od, const OffloadGrads *off, int ranks)
{
    MeOptParam flat = { .numel = sat_add(off->numel, ranks - 1) / ranks };
    flat.bytes = sat_mul(flat.numel, 4);
    MeOptState st = { 0 };
    if (flat.numel) od->state(&flat, &st);
    return sat_add(sat_mul(2, flat.bytes), sat_add(st.bytes, st.paged));
}

/* ZeRO-Offload's settings: DeepSpeed's offload_optimizer runs under ZeRO
 * (one GPU is ZeRO with one rank), offload_param under stage 3 only. */
static int err_offload(const MemestMemorySettings *s, char *err, size_t errlen)
{
    const char *why = s->offload < 0 || s->offload > MEMEST_OFFLOAD_PARAMS ? "unknown offload"
                      : s->mode != MEMEST_RUN_TRAIN ? "offload moves a training step's model states: give --train"
                      : s->gpus > 1 && s->shard < MEMEST_SHARD_ZERO1 ? "DeepSpeed offloads ZeRO's partitions: give --shard zero1, zero2 or zero3"
                      : s->offload == MEMEST_OFFLOAD_PARAMS && (s->gpus < 2 || s->shard < MEMEST_SHARD_ZERO3)
                          ? "offload_param is ZeRO-3's: give --gpus N --shard zero3"
                      : me_optimizer_paged(s->optimizer) ? "a paged optimizer already keeps its state in unified memory"
                                                          : NULL;
    if (why && err && errlen) snprintf(err, errlen, "--offload %s: %s", s->offload == MEMEST_OFFLOAD_PARAMS ? "params" : "optimizer", why);
    return why ? -1 : 0;
}

/* An implementation the optimizer does not have in the modelled torch
 * (foreach for Adafactor, fused for SGD in 1.13, fused on a CPU), or paged
 * state without CUDA, is an error: there is nothing to simulate. */
static int err_optimizer_impl(const MemestMemorySettings *s, char *err, size_t errlen)
{
    const MeOptimizer *od = me_optimizer(s->optimizer);
    const char *why = NULL;
    MemestOptimizerImpl impl = memest_optimizer_impl_of(s);
    if ((int)s->optimizer_impl < 0 || s->optimizer_impl >= MEMEST_OPT_IMPL_COUNT) why = "is not an implementation";
    else if (s->torch < 0 || s->torch >= MEMEST_TORCH_COUNT) why = "is asked of no known torch version";
    else if (impl == MEMEST_OPT_IMPL_FOREACH && me_optimizer_foreach_lists(od, s->torch) < 0) why = "has no foreach path";
    else if (impl == MEMEST_OPT_IMPL_FUSED && !me_optimizer_fused(od, s->torch)) why = "has no fused kernel";
    else if (impl == MEMEST_OPT_IMPL_FUSED && s->runtime != MEMEST_RUNTIME_CUDA) why = "is fused on CUDA only";
    else if (od->paged && s->runtime != MEMEST_RUNTIME_CUDA)
        why = "pages CUDA unified memory: CUDA only";
    if (!why) return 0;
    if (err && errlen)
        snprintf(err, errlen, "optimizer %s (%s, torch %s) %s", od->name, memest_optimizer_impl_name(impl),
                 memest_torch_name((MemestTorch)s->torch), why);
    return -1;
}

void memest_memory_default_settings(MemestMemorySettings *s)
{
    *s = (MemestMemorySettings){ .mode = MEMEST_RUN_INFER, .optimizer = MEMEST_OPT_SGD, .runtime = MEMEST_RUNTIME_CUDA, .step = 1,
                                 .optimizer_impl = MEMEST_OPT_IMPL_DEFAULT, .torch = MEMEST_TORCH_1_13 };
}

int memest_memory(const MemestModel *model, const MemestMemorySettings *s, MemestMemory *out, char *err, size_t errlen)
{
    if (!model || !model->bound) {
        if (err && errlen) snprintf(err, errlen, "no model with a valid binding");
        return ME_EINVAL;
    }
    return run_step_events(model, s, out, err, errlen, NULL, 0, NULL, NULL, NULL);
}

int me_timeline_simulate(MemestModel *model, const MemestMemorySettings *s, const MeTlSink *sink, MemestMemory *out, char *err,
                         size_t errlen)
{
    return run_step_events(model, s, out, err, errlen, NULL, 0, sink, NULL, NULL);
}

/* model.train() normalizes a BatchNorm with its batch's statistics, and
 * F.batch_norm refuses a batch of one value per channel
 * (torch/nn/functional.py _verify_batch_size: "Expected more than 1 value
 * per channel when training"): DeepLabV3's ASPP pooling at batch 1. No
 * such step exists to predict. */
static int bn_batch_ok(const MeGraph *g, char *err, size_t errlen)
{
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (!n->desc || n->desc->cls != ME_C_BN || n->n_in < 1 || n->in[0] < 0 || !g->v[n->in[0]].known) continue;
        const MeShape *x = &g->v[n->in[0]].shape;
        int64_t per = x->rank >= 2 && x->d[1] > 0 ? me_shape_numel(x) / x->d[1] : 0;
        if (per != 1) continue;
        char sh[128];
        me_shape_str(x, sh, sizeof(sh), "x", 0);
        if (err && errlen)
            snprintf(err, errlen, "%s: node '%s' (%s): --train normalizes with the batch's statistics and its input %s has one "
                     "value per channel, which PyTorch refuses in training (F.batch_norm: \"Expected more than 1 value per "
                     "channel when training\"); use a larger --batch", g->path, n->name, n->op, sh);
        return ME_EINVAL;
    }
    return 0;
}

/* The F.scaled_dot_product_attention calls a file states (canon/sdpa.c),
 * the first's node in *first */
static int sdpa_calls(const MemestModel *model, int *first)
{
    int n = 0;
    *first = -1;
    for (int i = 0; model && i < model->g.nn; i++)
        if ((model->g.n[i].flags & ME_N_SDPA) && !n++) *first = i;
    return n;
}

/* torch 1.13 has no F.scaled_dot_product_attention: the front ends refuse
 * it for a file that calls one. Asked anyway (memest-measure, whose
 * executor runs the ops as written), the timeline runs the spelled-out ops. */
int memest_model_runs_on(const MemestModel *model, MemestTorch torch, char *err, size_t errlen)
{
    int first, n = sdpa_calls(model, &first);
    if (!n || torch != MEMEST_TORCH_1_13) return 0;
    if (err && errlen)
        snprintf(err, errlen, "%s: '%s' calls F.scaled_dot_product_attention (%d call(s), as torch >= 2.0 exports it), which "
                 "torch 1.13 does not have: torch 1.13 cannot run this model (leave the torch version unset or give 2)",
                 model->g.path ? model->g.path : "", memest_node_name(model, first), n);
    return ME_EINVAL;
}

MemestTorch memest_model_torch(const MemestModel *model)
{
    if (!model) return MEMEST_TORCH_1_13;
    int first;
    return model->g.torch_major >= 2 || sdpa_calls(model, &first) ? MEMEST_TORCH_2 : MEMEST_TORCH_1_13;
}

/* The step, told to the statistics (out, and the series rec->series[slot]
 * when rec is given), on CUDA the caching-allocator model, and extra when
 * given. prev: step 1's figures when the caller has them (--grad's step 2
 * starts beside step 1's graph), else step 2 simulates step 1 itself.
 * holds: the module scopes' holds to apply, NULL for the model's own. */
static int run_step_events(const MemestModel *model, const MemestMemorySettings *s, MemestMemory *out, char *err, size_t errlen,
                           MeMemResult *rec, int slot, const MeTlSink *extra, const MemestMemory *prev, const int *holds)
{
    MeGraph *g = (MeGraph *)&model->g; /* only read here; Sim keeps a plain pointer */
    Sim m = { .g = g, .s = s, .out = out };
    bool *frozen_w = NULL;
    uint8_t *es = NULL;
    MeAllocator *alloc = NULL;
    MeTlStats stats = { .out = out };
    if (rec) {
        rec->n_series[slot] = 0;
        stats.series = &rec->series[slot];
        stats.n_series = &rec->n_series[slot];
        stats.cap_series = &rec->cap_series[slot];
    }
    memset(out, 0, sizeof(*out));
    out->peak_node = -1;
    if (!s || (int)s->mode < 0 || s->mode > MEMEST_RUN_TRAIN || (int)s->optimizer < 0 || s->optimizer >= MEMEST_OPT_COUNT) {
        if (err && errlen) snprintf(err, errlen, "invalid memory settings");
        return ME_EINVAL;
    }
    if (s->mode == MEMEST_RUN_TRAIN && (err_optimizer_impl(s, err, errlen) < 0)) return ME_EINVAL;
    m.grad = s->mode != MEMEST_RUN_INFER;
    m.sdpa = s->torch == MEMEST_TORCH_2;
    m.dp.ranks = s->gpus > 1 ? s->gpus : 1;
    m.dp.shard = s->shard;
    m.dp.offload = s->mode == MEMEST_RUN_TRAIN ? s->offload : 0;
    if (s->offload && (err_offload(s, err, errlen) < 0)) return ME_EINVAL;
    m.cuda = s->runtime == MEMEST_RUNTIME_CUDA;
    if (m.cuda && me_allocator_new(&alloc) < 0) return ME_ENOMEM;
    m.sinks[m.nsinks++] = (MeTlSink){ .opaque = &stats, .event = me_tl_stats_event, .kinds = ME_TL_STATS_KINDS };
    if (alloc) m.sinks[m.nsinks++] = (MeTlSink){ .opaque = alloc, .event = me_allocator_event, .kinds = ME_ALLOCATOR_KINDS };
    if (extra) m.sinks[m.nsinks++] = *extra;
    for (int k = 0; k < m.nsinks; k++) {
        if (!m.sinks[k].kinds) m.sinks[k].kinds = ~0u;
        m.heard |= m.sinks[k].kinds;
    }
    m.vst = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    m.vgrad = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    m.grows = me_calloc((size_t)g->nv + 1, sizeof(int64_t));
    m.rg = me_calloc((size_t)g->nv + 1, sizeof(bool));
    m.saved.saved_head = me_malloc(sizeof(int) * (size_t)(g->nn + 1));
    m.saved.saved_tail = me_malloc(sizeof(int) * (size_t)(g->nn + 1));
    int *pgrad = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    m.hold.hold_next = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    m.hold.hold_head = me_malloc(sizeof(int) * (size_t)(g->nn + 1));
    m.ckpt.seg = me_malloc(sizeof(int) * (size_t)(g->nn + 1));
    m.ckpt.seg_first = me_malloc(sizeof(int) * (size_t)(g->nn + 1));
    m.ckpt.seg_last = me_malloc(sizeof(int) * (size_t)(g->nn + 1));
    m.ckpt.seg_redone = me_calloc((size_t)g->nn + 1, sizeof(bool));
    m.ckpt.seg_held = me_calloc((size_t)g->nn + 1, sizeof(int *));
    m.ckpt.n_seg_held = me_calloc((size_t)g->nn + 1, sizeof(int));
    m.ckpt.own_uses = me_calloc((size_t)g->nv + 1, sizeof(int));
    m.ckpt.ext_uses = me_calloc((size_t)g->nv + 1, sizeof(int));
    m.layout.stride_at = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    m.amp.wcache = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    es = me_malloc((size_t)g->nv + 1);
    m.layout.mm_copy[0] = m.layout.mm_copy[1] = -1;
    int rc = 0;
    if (!m.layout.stride_at || !m.amp.wcache || !es) {
        rc = ME_ENOMEM;
        goto end;
    }
    if (!m.ckpt.seg || !m.ckpt.seg_first || !m.ckpt.seg_last || !m.ckpt.seg_redone || !m.ckpt.seg_held || !m.ckpt.n_seg_held || !m.ckpt.own_uses || !m.ckpt.ext_uses) {
        rc = ME_ENOMEM;
        goto end;
    }
    if (!m.vst || !m.vgrad || !m.grows || !m.rg || !m.saved.saved_head || !m.saved.saved_tail || !pgrad || !m.hold.hold_next || !m.hold.hold_head) {
        rc = ME_ENOMEM;
        goto end;
    }
    for (int i = 0; i < g->nv; i++) {
        m.vst[i] = m.vgrad[i] = -1;
        pgrad[i] = -1;
        m.layout.stride_at[i] = -1;
        m.amp.wcache[i] = -1;
        es[i] = (uint8_t)me_dtype_size(g->v[i].dtype);
    }
    m.amp.es = es;
    for (int i = 0; i <= g->nn; i++) m.hold.hold_head[i] = m.saved.saved_head[i] = -1;
    m.hold.hold_end = holds ? holds : model->hold_end; /* read only: shared by the two steps */
    if (s->mode == MEMEST_RUN_TRAIN && (rc = plan_segments(&m)) < 0) goto end;
    if (s->mode == MEMEST_RUN_TRAIN && (rc = bn_batch_ok(g, err, errlen)) < 0) goto end;
    if (s->mode == MEMEST_RUN_TRAIN && s->checkpoint == MEMEST_CHECKPOINT_LAYERS && !m.ckpt.nseg) {
        if (err && errlen) snprintf(err, errlen, "%s: --checkpoint layers: the model marks no layers to checkpoint (a language model's decoder layers)", g->path);
        rc = ME_EINVAL;
        goto end;
    }
    if (s->mode == MEMEST_RUN_TRAIN && s->checkpoint == MEMEST_CHECKPOINT_SELECTIVE && !m.ckpt.nseg) {
        if (err && errlen)
            snprintf(err, errlen, "%s: --checkpoint selective: the model marks no core attention to recompute (built for "
                     "GPT-2/GPT-NeoX configs' eager attention under --train)", g->path);
        rc = ME_EINVAL;
        goto end;
    }
    if (s->mode != MEMEST_RUN_TRAIN)
        for (int i = 0; i < g->nn; i++) m.ckpt.seg[i] = -1;

    /* Alive before the step: weights, inputs, and state from an earlier step. */
    if (!(frozen_w = frozen_weights(g))) { rc = ME_ENOMEM; goto end; }
    /* the optimizer's state, summed per parameter (optim.h), and its
     * temporaries: single-tensor, the largest while one parameter updates;
     * foreach, lists over all of them */
    const MeOptimizer *od = me_optimizer(s->optimizer);
    MeOptState ost = { 0 };
    int64_t param_bytes = 0, opt_temps = 0;
    int ranks = m.dp.ranks > 1 && m.dp.shard >= MEMEST_SHARD_ZERO1 ? m.dp.ranks : 1;
    int64_t host = 0; /* offload: bytes on this rank's host */
    OffloadGrads off = { 0 };
    for (int i = 0; i < g->nv; i++) {
        MeValue *v = &g->v[i];
        if (v->kind == ME_V_INIT && v->n_uses) {
            int64_t wb = vb(&m, v);
            if (m.dp.ranks > 1 && m.dp.shard >= MEMEST_SHARD_ZERO3 && v->role == ME_R_PARAM) wb = sat_add(wb, m.dp.ranks - 1) / m.dp.ranks;
            if (m.dp.offload == MEMEST_OFFLOAD_PARAMS && v->role == ME_R_PARAM) host = sat_add(host, wb), wb = 0; /* the shard on the host */
            int id = st_make(&m, wb, MEMEST_MEM_WEIGHTS, i, false);
            if (id < 0) { rc = ME_ENOMEM; goto end; }
            m.st[id].persistent = true;
            m.vst[i] = id;
            /* the other modules' own copies of a pooled table buffer (shape.c, table_copies) */
            for (uint32_t c = 1; c < v->copies; c++) {
                int x = st_new(&m, wb, MEMEST_MEM_WEIGHTS);
                if (x < 0) { rc = ME_ENOMEM; goto end; }
                m.st[x].persistent = true;
            }
            bind(&m, i, id, false);
            m.rg[i] = v->role == ME_R_PARAM && m.grad && !frozen_w[i];
            if (m.rg[i] && od) {
                MeOptParam p = opt_param(&m, v);
                param_bytes = sat_add(param_bytes, p.bytes);
                if (m.dp.offload) {
                    if (p.bytes > off.largest) off.largest = p.bytes;
                    off.numel = sat_add(off.numel, p.numel);
                    off.bytes = sat_add(off.bytes, p.bytes);
                } else {
                    od->state(&p, &ost);
                }
                /* the update runs on this rank's shard of the state */
            }
        } else if (v->kind == ME_V_INPUT) {
            int id = st_make(&m, vb(&m, v), MEMEST_MEM_INPUTS, i, false);
            if (id < 0) { rc = ME_ENOMEM; goto end; }
            /* a donated input (DynamicCache's old key/value tensor) is
             * freed by its last reader like an activation */
            m.st[id].persistent = !v->donated;
            if (v->donated) m.st[id].refs = v->n_uses;
            m.vst[i] = id;
            bind(&m, i, id, false);
            m.rg[i] = m.grad && (v->requires_grad || s->input_grad) && me_dtype_is_float(v->dtype);
        }
    }
    bool train = s->mode == MEMEST_RUN_TRAIN;
    if (train && od && (opt_temps = update_temps(&m, od, ranks)) < 0) { rc = ME_ENOMEM; goto end; } /* only a step updates */
    int opt_state = -1;
    int64_t opt_bytes = train ? ost.bytes : 0, paged_bytes = train ? ost.paged : 0;
    if (ost.shared) opt_bytes = sat_add(opt_bytes, od->shared_bytes);
    if (ranks > 1) opt_bytes = sat_add(opt_bytes, ranks - 1) / ranks, paged_bytes = sat_add(paged_bytes, ranks - 1) / ranks;
    MemestOptimizerImpl impl = memest_optimizer_impl_of(s);
    if (train && impl == MEMEST_OPT_IMPL_FOREACH)
        opt_temps = sat_mul(me_optimizer_foreach_lists(od, s->torch), sat_add(param_bytes, ranks - 1) / ranks);
    if (train && impl == MEMEST_OPT_IMPL_FUSED) opt_temps = 0;
    int bucket = -1;
    if (train && m.dp.offload) {
        /* the update runs on the host (DeepSpeedCPUAdam); the GPU keeps
         * stage_1_and_2.py's temp_grad_buffer_for_gpu_offload (the largest
         * parameter's numel, in the parameters' dtype) */
        opt_temps = 0;
        /* + temp_grad_buffer_for_cpu_offload, pinned */
        out->host = (uint64_t)sat_add(sat_add(host, od ? offload_host(od, &off, ranks) : 0), off.largest);
        int tb = st_new(&m, off.largest, MEMEST_MEM_GRADIENTS);
        if (tb < 0) { rc = ME_ENOMEM; goto end; }
        m.st[tb].persistent = true;
    }
    if (train && (s->step >= 2 || od->at_init)) {
        if ((opt_state = opt_state_new(&m, opt_bytes, paged_bytes)) < -1) { rc = ME_ENOMEM; goto end; }
    }
    /* The loss's target exists before the step, like the inputs: class
     * indices (int64, one per row of logits) for cross_entropy, a float
     * tensor of the output's shape for mse_loss. The classes are the last
     * dim up to rank 3 ([B, C]; [B, T, V] flattened as HF does), dim 1 from
     * rank 4 (F.cross_entropy on [N, C, H, W] against [N, H, W]). */
    int loss_ov = train && g->n_outputs ? g->outputs[0] : -1;
    int loss = loss_ov >= 0 && numel0(&g->v[loss_ov].shape) == 1 ? LOSS_IS_OUTPUT : (int)s->loss;
    if (loss_ov >= 0 && (loss == MEMEST_LOSS_CROSS_ENTROPY || loss == MEMEST_LOSS_MSE)) {
        const MeShape *os = &g->v[loss_ov].shape;
        int cdim = os->rank >= 4 ? 1 : os->rank - 1;
        int64_t rows = cdim >= 0 && os->d[cdim] > 0 ? numel0(os) / os->d[cdim] : 1;
        int64_t tb = loss == MEMEST_LOSS_MSE ? vb(&m, &g->v[loss_ov]) : sat_mul(rows, 8);
        int id = st_new(&m, tb, MEMEST_MEM_INPUTS);
        if (id < 0) { rc = ME_ENOMEM; goto end; }
        m.st[id].persistent = true;
    }
    /* A later step starts with the cuBLAS workspaces step 1 made: they are
     * held until the process ends (cublas_workspace). */
    int64_t fwd_ws = 0;
    if (m.cuda && s->step >= 2) {
        bool fwd, bwd;
        if ((rc = gemm_handles(&m, &fwd, &bwd)) < 0) goto end;
        if (fwd) {
            int ws = cublas_workspace(&m);
            if (ws < 0) { rc = ME_ENOMEM; goto end; }
            fwd_ws = m.st[ws].bytes;
            m.workspace = true;
        }
        if (bwd && train) {
            if (cublas_workspace(&m) < 0) { rc = ME_ENOMEM; goto end; }
            m.bwd_workspace = true;
        }
    }
    /* --grad, step 2: the seed's loop, `outputs = model(inputs)` again
     * without no_grad. The previous output holds its grad_fn and through
     * it every tensor the forward saved (torch/csrc/autograd: a Node owns
     * its SavedVariables, an output's grad_fn owns the Node), and Python
     * re-binds `outputs` only when the call returns: the next forward runs
     * beside step 1's graph, which goes right after it. Step 1 ended with
     * exactly that graph alive (end - baseline). */
    int prev_graph = -1;
    if (s->mode == MEMEST_RUN_INFER_GRAD && s->step >= 2) {
        MemestMemory m1;
        if (prev) m1 = *prev;
        else {
            MemestMemorySettings s1 = *s;
            s1.step = 1;
            s1.record_series = false;
            if ((rc = run_step_events(model, &s1, &m1, err, errlen, NULL, 0, NULL, NULL, holds)) < 0) goto end;
        }
        /* step 1's end holds the forward's cuBLAS workspace too, made above */
        int64_t graph = (int64_t)(m1.end - m1.baseline) - fwd_ws;
        if ((prev_graph = st_new(&m, graph > 0 ? graph : 0, MEMEST_MEM_SAVED)) < 0) { rc = ME_ENOMEM; goto end; }
        m.st[prev_graph].persistent = true;
    }
    out->baseline = (uint64_t)stats.total;
    note(&m, 0);

    forward(&m);
    drop_autocast_cache(&m);
    if (prev_graph >= 0) st_free(&m, prev_graph);
    if (s->mode == MEMEST_RUN_TRAIN) out->forward_end = forward_held(&m, &stats);
    if (train && !m.failed && g->n_outputs) {
        int ov = g->outputs[0];
        int64_t ob = vb(&m, &g->v[ov]);
        /* cross_entropy and mse_loss are on autocast's fp32 lists (CPU's
         * and CUDA's): they run on a float32 copy of a lower-precision output */
        int oes = me_dtype_size(g->v[ov].dtype);
        int64_t ob32 = sat_mul(numel0(&g->v[ov].shape), oes > 4 ? oes : 4);
        /* .float() in the pow2-mean loss: a copy whenever the output is
         * below float32, autocast or not */
        int64_t pf = oes < 4 ? sat_mul(numel0(&g->v[ov].shape), 4) : ob;
        if (!s->amp) ob32 = ob;
        m.phase = MEMEST_PHASE_BACKWARD;
        m.node = -1;
        /* The loss's forward (doc/memory.md, "Losses"); kept: what its
         * backward reads beyond the output and target. */
        int kept = -1;
        MeTlEvent lr = me_tl_event(ME_TL_RUN);
        lr.run = ME_TL_RUN_LOSS;
        switch (loss) {
        case MEMEST_LOSS_CROSS_ENTROPY:
            /* log_softmax's result is saved (LogSoftmaxBackward); the fp32
             * copy it read is not; nll_loss makes scalars only. Logits of
             * rank > 2 are flattened by view(-1, V): no copy. */
            kept = lr.storage = st_new(&m, ob32, MEMEST_MEM_SAVED);
            note_run(&m, ob32 != ob ? ob32 : 0, &lr);
            break;
        case MEMEST_LOSS_MSE: {
            /* mse_loss writes (x - t)^2 into an output-sized tensor
             * (TensorIterator's output), then reduces it
             * (apply_loss_reduction); MseLossBackward saves self and
             * target: under autocast self is the fp32 copy. Measured (torch
             * 1.13, CPU, tests/oracle/measure_sem.py): aten::mse_loss
             * makes a second output-sized block that lives as long as the
             * loss tensor, to the end of the step. */
            if (ob32 != ob) kept = lr.storage = st_new(&m, ob32, MEMEST_MEM_SAVED);
            int lb = st_new(&m, ob32, MEMEST_MEM_ACTIVATIONS);
            if (lb < 0) { rc = ME_ENOMEM; goto end; }
            m.st[lb].holds = 1; /* freed with the step's locals */
            note_run(&m, ob32, &lr);
            break;
        }
        case MEMEST_LOSS_NONE:
            /* the caller's ones_like(out): alive until backward returns */
            kept = st_make(&m, ob, MEMEST_MEM_ACT_GRADS, ov, true);
            break;
        case MEMEST_LOSS_POW2_MEAN:
            /* out.float() copies a lower-precision output, and PowBackward0
             * saves that copy (self); pow(2)'s result lives while mean
             * reduces it, then goes (MeanBackward keeps sizes only) */
            if (pf != ob) kept = lr.storage = st_new(&m, pf, MEMEST_MEM_SAVED);
            note_run(&m, pf, &lr);
            break;
        case LOSS_IS_OUTPUT:
            break;
        default: /* mean, sum: a scalar */
            note_run(&m, 0, &lr);
            break;
        }
        if (kept < 0 && (loss == MEMEST_LOSS_CROSS_ENTROPY || loss == MEMEST_LOSS_NONE)) { rc = ME_ENOMEM; goto end; }
        /* outputs the model's forward itself let go of (HF computes the
         * loss inside forward and returns it: the logits and shift_logits
         * are its locals) die once the loss has run, before backward */
        for (int k = 0; k < g->n_outputs; k++) {
            int v = g->outputs[k];
            if (g->v[v].donated && m.vst[v] >= 0 && m.st[m.vst[v]].holds > 0) {
                m.st[m.vst[v]].holds--;
                st_release(&m, m.vst[v]);
            }
        }
        if (m.rg[ov]) {
            /* the gradient of the output. cross_entropy: NllLossBackward's
             * zeros of log_softmax's shape, then _log_softmax_backward_data's
             * result (fp32 under autocast, then ToCopyBackward's copy);
             * mse_loss: mse_loss_backward's zeros_like(self) (the same
             * cast back under autocast); mean: MeanBackward's
             * grad.expand() / numel, a new tensor; sum: SumBackward's
             * grad.expand(), a stride-0 view that the first kernel reading
             * it makes contiguous (addmm_impl_cpu_ clones it,
             * convolution_backward calls contiguous()): counted as one
             * output-sized gradient; none: the caller's tensor. A scalar
             * output is the loss: backward() seeds ones_like(loss). */
            int g1 = -1, g2;
            if (loss == MEMEST_LOSS_NONE) {
                g2 = kept;
                kept = -1;
                m.st[g2].holds = 2; /* the caller's reference, then autograd's */
                run(&m, ME_TL_RUN_SEED_GRAD, g2, -1, -1);
            } else {
                if (loss == MEMEST_LOSS_CROSS_ENTROPY || (loss == MEMEST_LOSS_MSE && ob32 != ob))
                    if ((g1 = st_new(&m, ob32, MEMEST_MEM_ACT_GRADS)) < 0) { rc = ME_ENOMEM; goto end; }
                /* pow2-mean: MeanBackward's grad.expand() / numel, then
                 * pow_backward's `return grad * (exp * self.pow(exp - 1)).conj();`
                 * (FunctionsManual.cpp): self.pow(1) and its double are
                 * temporaries of that one full-expression, so C++ keeps both
                 * until the product is made: three tensors the size of the
                 * float32 input beside the mean's gradient. A lower-precision
                 * output's gradient is the product cast back
                 * (ToCopyBackward), made once the others are gone. */
                int64_t pw = 0;
                if (loss == MEMEST_LOSS_POW2_MEAN) {
                    if ((g1 = st_new(&m, pf, MEMEST_MEM_ACT_GRADS)) < 0) { rc = ME_ENOMEM; goto end; }
                    pw = pf == ob ? sat_mul(2, pf) : sat_mul(3, pf) - ob;
                }
                if ((g2 = st_make(&m, ob, MEMEST_MEM_ACT_GRADS, ov, true)) < 0) { rc = ME_ENOMEM; goto end; }
                if (loss == LOSS_IS_OUTPUT) {
                    run(&m, ME_TL_RUN_SEED_GRAD, g2, -1, -1);
                } else {
                    MeTlEvent rg = me_tl_event(ME_TL_RUN);
                    rg.run = ME_TL_RUN_LOSS_GRAD;
                    rg.storage = g1 >= 0 ? g1 : g2;
                    rg.accum = g2;
                    rg.gout = kept;
                    note_run(&m, pw, &rg);
                }
                if (g1 >= 0) st_free(&m, g1);
                if (kept >= 0) st_free(&m, kept);
                m.st[g2].holds = 1;
            }
            m.vgrad[ov] = g2;
            bind(&m, ov, g2, true);
            if (m.dp.offload) {
                /* backward's ipg bucket, reduce_bucket_size (5e8) elements
                 * at most, released by step() (_release_ipg_buffers) */
                int64_t bb = off.numel <= 500000000 ? off.bytes : sat_mul(500000000, off.bytes / off.numel);
                if ((bucket = st_new(&m, bb, MEMEST_MEM_GRADIENTS)) < 0) {
                    rc = ME_ENOMEM;
                    goto end;
                }
                m.st[bucket].persistent = true;
            }
            backward(&m, pgrad);
            out->grads_end = (uint64_t)stats.live[MEMEST_MEM_GRADIENTS];
            if (loss == MEMEST_LOSS_NONE) {
                m.st[g2].holds--;
                st_release(&m, g2);
            }
        } else if (kept >= 0) {
            st_free(&m, kept);
        }
        /* the step's peak before the update (pipeline: micro-batches are
         * in flight through forward and backward, not the optimizer's) */
        out->backward_peak = alloc ? me_allocator_stats(alloc)->peak_allocated : out->peak;
        out->backward_peak_grads = out->at_peak[MEMEST_MEM_GRADIENTS];
        m.phase = MEMEST_PHASE_OPTIMIZER;
        m.node = -1;
        if (s->step < 2 && !od->at_init) {
            if ((opt_state = opt_state_new(&m, opt_bytes, paged_bytes)) < -1) { rc = ME_ENOMEM; goto end; }
        }
        /* the update's temporaries (optim.h), one parameter with a
         * gradient after the other on this rank's shard of the state */
        int t = note_open(&m, opt_temps);
        for (int i = 0, k = 0; heard(&m, ME_TL_RUN) && s->optimizer != MEMEST_OPT_NONE && i < g->nv; i++)
            if (pgrad[i] >= 0 && g->v[i].kind == ME_V_INIT) {
                MeTlEvent r = me_tl_event(ME_TL_RUN);
                r.run = ME_TL_RUN_OPTIMIZER;
                r.storage = t;
                r.value = i;
                r.input = k++;
                r.accum = pgrad[i];
                r.gout = opt_state;
                emit(&m, &r);
            }
        note_close(&m, t);
        if (bucket >= 0) st_free(&m, bucket);
        /* zero_grad(set_to_none=True) unless only backward ran; then the
         * step's locals go, except outputs the caller keeps */
        if (s->optimizer != MEMEST_OPT_NONE)
            for (int i = 0; i < g->nv; i++)
                if (pgrad[i] >= 0) st_free(&m, pgrad[i]);
        if (s->optimizer != MEMEST_OPT_NONE)
            for (int i = 0; i < m.nst; i++)
                if (!m.st[i].persistent) st_free(&m, i);
    }
    if (m.too_big) {
        const MeNode *tn = m.too_big_node >= 0 ? &g->n[m.too_big_node] : NULL;
        /* names come from the file and end up on a terminal: escaped */
        char ename[256], eop[128];
        me_escape(tn ? tn->name : NULL, ename, sizeof(ename));
        me_escape(tn ? tn->op : NULL, eop, sizeof(eop));
        if (err && errlen)
            snprintf(err, errlen, "%s: %s%s%s%s%s: the memory in use would pass %lld bytes (1 EiB), which no device holds; the model's shapes are not plausible",
                     g->path, tn ? "node '" : "", tn ? ename : m.too_big_phase == MEMEST_PHASE_OPTIMIZER ? "the optimizer step" : "the weights, inputs or loss",
                     tn ? "' (" : "", eop, tn ? ")" : "", (long long)ME_SIM_MAX_BYTES);
        rc = ME_EINVAL;
    } else if (m.failed) rc = ME_ENOMEM;
    out->end = (uint64_t)stats.total;
    out->peak_allocated = out->peak;
    if (alloc) {
        const MeAllocStats *as = me_allocator_stats(alloc);
        out->peak_allocated = as->peak_allocated;
        out->peak_reserved = as->peak_reserved;
        /* lazy module loading (CUDA >= 11.7, default from 12.2): a few
         * hundred MiB (REFERENCE.md); 400 MiB unless told */
        out->cuda_context = s->cuda_context ? s->cuda_context : UINT64_C(400) << 20;
        out->nvidia_smi = out->peak_reserved + out->cuda_context;
    }
    /* outside any node: before the first op, in the loss, or in the optimizer */
    out->peak_name = out->peak_node >= 0 ? g->n[out->peak_node].module
                   : out->peak_phase == MEMEST_PHASE_OPTIMIZER ? "(optimizer step)"
                   : out->peak_phase == MEMEST_PHASE_BACKWARD ? "(loss)" : "(before the first op)";
end:
    me_free(m.saved.saved_head);
    me_free(m.saved.saved_tail);
    me_free(m.saved.links);
    me_free(m.pend);
    me_free(m.split_left);
    me_free(m.split_head);
    me_free(m.split_next);
    me_free(m.fz);
    me_free(m.fz_of);
    me_free(m.st);
    me_free(m.vst);
    me_free(m.vgrad);
    me_free(m.grows);
    me_free(m.rg);
    me_free(pgrad);
    for (int i = 0; m.ckpt.seg_held && i < g->nn; i++) me_free(m.ckpt.seg_held[i]);
    me_free(m.ckpt.seg_held);
    me_free(m.ckpt.n_seg_held);
    me_free(m.ckpt.seg);
    me_free(m.ckpt.seg_first);
    me_free(m.ckpt.seg_last);
    me_free(m.ckpt.seg_redone);
    me_free(m.ckpt.own_uses);
    me_free(m.ckpt.ext_uses);
    me_free(m.layout.strides);
    me_free(m.layout.stride_at);
    me_free(m.amp.wcache);
    me_free(es);
    me_free(frozen_w);
    me_allocator_free(alloc);
    me_free(m.hold.hold_next);
    me_free(m.hold.hold_head);
    if (rc == ME_ENOMEM && err && errlen) snprintf(err, errlen, "out of memory");
    return rc;
}

typedef struct StepJob {
    const MemestModel *model;
    MemestMemorySettings s;
    MeMemResult *r;
    const MemestMemory *prev; /* step 1's figures, for --grad's step 2 */
    int rc;
    char err[sizeof(((MeMemResult *)0)->skipped)];
} StepJob;

static void *run_step(void *p)
{
    StepJob *j = p;
    int k = j->s.step - 1;
    j->rc = run_step_events(j->model, &j->s, &j->r->mem[k], j->err, sizeof(j->err), j->s.record_series ? j->r : NULL, k, NULL,
                            j->prev, NULL);
    return NULL;
}

/* What the timeline assumed for the nodes it cannot model (opaque()):
 * empty when there are none. Said in the reports and on stderr, loudest
 * when an output's size is unknown and counted as 0 bytes. */
static void assumptions(const MeGraph *g, char *buf, size_t len)
{
    int nodes = 0, unknown = 0, unsized = 0, first = -1, first_unsized = -1;
    for (int ni = 0; ni < g->nn; ni++) {
        const MeNode *n = &g->n[ni];
        if (!opaque(g, n)) continue;
        nodes++;
        if (!n->desc) {
            unknown++;
            if (first < 0) first = ni;
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && !g->v[n->out[k]].known) {
                unsized++;
                if (first_unsized < 0) first_unsized = n->out[k];
            }
    }
    buf[0] = 0;
    if (!nodes) return;
    char ename[256], eop[128], vname[256]; /* file names reach terminals: escaped */
    char first_s[128] = "", warn[256] = "";
    if (first >= 0)
        snprintf(first_s, sizeof(first_s), ", first '%.60s' (%.40s)", me_escape(g->n[first].name, ename, sizeof(ename)),
                 me_escape(g->n[first].op, eop, sizeof(eop)));
    if (unsized)
        snprintf(warn, sizeof(warn), "; WARNING: %d output(s) of unknown shape counted as 0 bytes (first '%.60s'), so the figures may be too low",
                 unsized, me_escape(g->v[first_unsized].name, vname, sizeof(vname)));
    snprintf(buf, len, "%d node(s) not modelled (%d of an unknown op%s%s): their outputs are sized from inferred or declared shapes; "
             "they keep nothing for backward and pass no gradient%s", nodes, unknown, first_s,
             nodes > unknown ? "; the rest below one, shapes unknown" : "", warn);
}

/* torch.optim's foreach=None is the single-tensor path in torch 1.13, which
 * memest models by default, and the foreach path on CUDA from torch 2.0
 * (optimizer.py, _default_to_fused_or_foreach), which --torch 2 models.
 * Said, with the bytes of torch 2's lists, where the update left to its
 * default would hold such lists in 2.x; not where the path was chosen. */
static void impl_note(const MemestModel *model, const MemestMemorySettings *s, MeMemResult *r)
{
    r->impl_note[0] = 0;
    const MeOptimizer *od = me_optimizer(s->optimizer);
    int lists = od ? me_optimizer_foreach_lists(od, MEMEST_TORCH_2) : 0;
    if (s->runtime != MEMEST_RUNTIME_CUDA || s->mode != MEMEST_RUN_TRAIN || s->optimizer_impl != MEMEST_OPT_IMPL_DEFAULT ||
        s->torch != MEMEST_TORCH_1_13 || lists <= 0 || !r->n_mem || me_deepspeed_update(s))
        return;
    const MeGraph *g = &model->g;
    bool *frozen = frozen_weights(g);
    if (!frozen) return; /* no note rather than a wrong one */
    int64_t bytes = 0;
    for (int i = 0; i < g->nv; i++) {
        const MeValue *v = &g->v[i];
        if (v->kind == ME_V_INIT && v->role == ME_R_PARAM && v->n_uses && !frozen[i])
            bytes = sat_add(bytes, sat_mul(numel0(&v->shape), me_dtype_size(v->dtype)));
    }
    me_free(frozen);
    snprintf(r->impl_note, sizeof(r->impl_note),
             "%s's update is modelled as torch 1.13 runs it by default, one parameter at a time; torch >= 2.0 runs the "
             "foreach path on CUDA when foreach is left None, whose update holds %d list%s as large as the parameters, "
             "%.2f MiB, at once: up to that much above this figure where the update sets the peak (--torch 2 models it)",
             od->name, lists, lists > 1 ? "s" : "", (double)sat_mul(lists, bytes) / 1048576.0);
}

/* nn.MultiheadAttention's attention (attn_core, attn_ctx) is where torch 1.13 and 2
 * differ most, and which one the user runs the file cannot say; nor can it
 * show need_weights, which decides it in 2.x. Said either way. */
static void attn_note(const MemestModel *model, const MemestMemorySettings *s, MeMemResult *r)
{
    r->attn_note[0] = 0;
    const MeGraph *g = &model->g;
    int calls = 0;
    const char *first = NULL;
    for (int i = 0; i < g->nn; i++) /* nn.MultiheadAttention's (mha.c); a stated SDPA call has sdpa.c's note */
        if ((g->n[i].flags & ME_N_ATTN_CTX) && !(g->n[i].flags & ME_N_SDPA)) {
            if (!calls++) first = g->n[i].module;
        }
    if (!calls || !r->n_mem) return;
    char e[256];
    me_escape(first ? first : "", e, sizeof(e));
    if (s->torch == MEMEST_TORCH_2)
        snprintf(r->attn_note, sizeof(r->attn_note),
                 "%d nn.MultiheadAttention call(s) ('%s'%s) run as scaled_dot_product_attention, as torch 2 does when "
                 "need_weights=False (nn.TransformerEncoderLayer and torchvision's ViT pass it): no [B*H, T, S] scores or "
                 "softmax are made or kept. The file cannot show need_weights; with True, nn.MultiheadAttention's default, "
                 "torch 2 runs the ops as 1.13 does (--torch 1.13 gives that timeline)",
                 calls, e, calls > 1 ? ", ..." : "");
    else
        snprintf(r->attn_note, sizeof(r->attn_note),
                 "%d nn.MultiheadAttention call(s) ('%s'%s) are modelled as torch 1.13 runs them, the [B*H, T, S] scores and "
                 "softmax made (and kept with autograd on); torch >= 2.0 runs scaled_dot_product_attention when "
                 "need_weights=False, which makes neither (--torch 2 models it)",
                 calls, e, calls > 1 ? ", ..." : "");
}

/* The library kernels a graph runs on CUDA: cuBLAS GEMMs, cuDNN
 * convolutions and recurrent layers (one scan, for the step count and the
 * cuDNN note) */
typedef struct Kernels {
    int gemm, conv, rnn;
} Kernels;

static Kernels kernels_of(const MeGraph *g)
{
    Kernels k = { 0 };
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (!runs_op(g, n)) continue;
        k.gemm += gemm_class(n->desc->cls);
        k.conv += n->desc->cls == ME_C_CONV || n->desc->cls == ME_C_CONVT;
        k.rnn += n->desc->cls == ME_C_RNN;
    }
    return k;
}

/* cuDNN's workspaces on CUDA: with cudnn.benchmark False (PyTorch's
 * default) cuDNN's heuristics pick each convolution's algorithm and PyTorch
 * takes the workspace it asks for from the caching allocator for that call
 * (Conv_v8.cpp); a cuDNN RNN also keeps a reserve for backward. Their sizes
 * are cuDNN's own, so they are said, not guessed. */
static void lib_note(const Kernels *kn, const MemestMemorySettings *s, MeMemResult *r)
{
    r->lib_note[0] = 0;
    int conv = kn->conv, rnn = kn->rnn;
    if (s->runtime != MEMEST_RUNTIME_CUDA || !r->n_mem || (!conv && !rnn)) return;
    char what[96] = "";
    if (conv) snprintf(what, sizeof(what), "%d convolution(s)%s", conv, rnn ? ", " : "");
    if (rnn) snprintf(what + strlen(what), sizeof(what) - strlen(what), "%d recurrent layer(s)", rnn);
    snprintf(r->lib_note, sizeof(r->lib_note),
             "cuDNN's workspaces are not in these figures (%s): with torch.backends.cudnn.benchmark False, PyTorch's default, "
             "cuDNN's heuristics choose each algorithm and PyTorch takes the workspace it asks for from the caching allocator "
             "for the call (a recurrent layer also keeps a reserve for backward), sizes only cuDNN knows; memest-measure "
             "reports the largest on a GPU (an H200 with cuDNN 9: 46 to 784 MiB at batch 32)",
             what);
}

int me_memory_run(const MemestModel *model, const MemestMemorySettings *s, MeMemResult *r, char *err, size_t errlen,
                  bool names_bound)
{
    me_memory_result_free(r);
    r->settings = *s;
    r->n_mem = 0;
    r->skipped[0] = 0;
    assumptions(&model->g, r->assumed, sizeof(r->assumed));
    /* training: step 2 has the optimizer's state; --grad: step 2 is the
     * loop's steady state (run_step_events); inference on CUDA: a later
     * call finds cuBLAS's workspace already made (cublas_workspace) */
    Kernels kn = s->runtime == MEMEST_RUNTIME_CUDA ? kernels_of(&model->g) : (Kernels){ 0 };
    int steps = (s->mode == MEMEST_RUN_TRAIN && s->optimizer != MEMEST_OPT_NONE) || s->mode == MEMEST_RUN_INFER_GRAD ||
                (s->mode == MEMEST_RUN_INFER && kn.gemm) ? 2 : 1;
    StepJob job[2];
    for (int k = 0; k < steps; k++) {
        job[k] = (StepJob){ .model = model, .s = *s, .r = r, .rc = 0 };
        job[k].s.step = k + 1;
        job[k].err[0] = 0;
    }
    /* Training's step 2 is independent of step 1 (the state it starts from
     * is modelled, not carried over), so on a huge graph the two run side
     * by side when the caller allows a thread. Allocation hooks set by the
     * caller need not be thread-safe: then one thread. --grad's step 2
     * starts from step 1's end: after it, with its figures. */
    if (s->mode == MEMEST_RUN_INFER_GRAD) job[1].prev = &r->mem[0];
    pthread_t th;
    bool two = steps == 2 && s->mode != MEMEST_RUN_INFER_GRAD && model->threads && !me_alloc_hooked() &&
               pthread_create(&th, NULL, run_step, &job[1]) == 0;
    run_step(&job[0]);
    if (two) pthread_join(th, NULL);
    else if (steps == 2 && job[0].rc >= 0) run_step(&job[1]);
    for (int k = 0; k < steps; k++) {
        if (job[k].rc == ME_EUNSUPPORTED) {
            snprintf(r->skipped, sizeof(r->skipped), "%s", job[k].err);
            r->n_mem = 0;
            return 0; /* reported, not fatal: the cost table still stands */
        }
        if (job[k].rc < 0) {
            if (err && errlen) snprintf(err, errlen, "%s", job[k].err);
            return job[k].rc;
        }
        r->n_mem = k + 1;
    }
    /* A graph that does not show which tensors the forwards bound to names:
     * the same steps with every one named (me_scope_holds' frame_end).
     * PyTorch's peak lies between the two: a name keeps its tensor until
     * re-bound, deleted or its frame returns (CPython's reference counting),
     * and which tensors had names the file cannot say. In training too: a
     * name keeps what autograd does not (held-out ho14's message-passing
     * loop, -11 % at batch 1, said nothing before). */
    for (int k = 0; names_bound && model->frame_end && k < r->n_mem; k++) {
        MemestMemory b;
        int rc = run_step_events(model, &job[k].s, &b, err, errlen, NULL, 0, NULL, k ? &r->mem[0] : NULL, model->frame_end);
        if (rc < 0) return rc;
        r->mem[k].peak_frames = b.peak_allocated;
    }
    /* said when the names could move the figure by more than the 2 % memest
     * aims for: the worst step's bound */
    r->names_note[0] = 0;
    int worst = -1;
    double up = 0;
    for (int k = 0; k < r->n_mem; k++) {
        const MemestMemory *x = &r->mem[k];
        double u = x->peak_frames && x->peak_allocated ? (double)x->peak_frames / (double)x->peak_allocated - 1.0 : 0.0;
        if (u > 0.02 && (worst < 0 || x->peak_frames > r->mem[worst].peak_frames)) { up = u; worst = k; }
    }
    if (worst >= 0)
        snprintf(r->names_note, sizeof(r->names_note),
                 "the file does not show which tensors the Python forwards kept in named variables (a name holds its "
                 "tensor until it is re-bound or its forward returns): the peak frees each after its last reader and "
                 "the calls it is an argument of; had every one been named, the peak%s would be %.2f MiB (+%.1f %%)",
                 r->n_mem > 1 ? (worst ? " of call 2" : " of call 1") : "", (double)r->mem[worst].peak_frames / 1048576.0,
                 100.0 * up);
    impl_note(model, s, r);
    lib_note(&kn, s, r);
    attn_note(model, s, r);
    return 0;
}

void me_memory_result_free(MeMemResult *r)
{
    for (int k = 0; k < 2; k++) {
        me_free(r->series[k]);
        r->series[k] = NULL;
        r->n_series[k] = r->cap_series[k] = 0;
    }
}

/* What a version changes: nn.MultiheadAttention's attention (attn_ctx),
 * in every mode; with autograd on, the tensors an op saves
 * (me_autograd_rule); in a training step, the update's path. */
int memest_torch_changes(const MemestAnalysis *an, const MemestMemorySettings *s)
{
    for (int i = 0; an && i < an->g->nn; i++)
        if (an->g->n[i].flags & ME_N_ATTN_CTX) return 1;
    if (s->mode != MEMEST_RUN_INFER && an && me_autograd_torch_differs(an->g)) return 1;
    return me_optimizer_torch_changes(s);
}

int memest_set_memory(MemestAnalysis *a, const MemestMemorySettings *s, char *err, size_t errlen)
{
    if (!a || !s) return ME_EINVAL;
    if (me_analysis_current(a) < 0) {
        if (err && errlen) snprintf(err, errlen, "%s: %s", a->g->path, memest_strerror(ME_ESTALE));
        return ME_ESTALE;
    }
    a->has_memory = true;
    return me_memory_run(a->model, s, &a->memory, err, errlen, true);
}

const char *memest_memory_note(const MemestAnalysis *a)
{
    return a && a->has_memory ? a->memory.assumed : "";
}

int memest_memory_steps(const MemestAnalysis *a, MemestMemory *out, int max)
{
    int n = a && a->has_memory ? a->memory.n_mem : 0;
    for (int k = 0; k < n && k < max; k++) out[k] = a->memory.mem[k];
    return n;
}

int memest_memory_series(const MemestAnalysis *a, int step, const MemestSeriesPoint **points, int *count)
{
    if (!a || !a->has_memory || step < 0 || step >= a->memory.n_mem || !a->memory.series[step]) {
        *points = NULL;
        *count = 0;
        return ME_EINVAL;
    }
    *points = a->memory.series[step];
    *count = a->memory.n_series[step];
    return 0;
}
