/* The names a chunk or split is unpacked into.
 *
 * `a, b = t.chunk(2, 1)` (or split, or unbind) binds each piece to a name,
 * and a piece is a view: t's storage lives while any piece's name does,
 * until the forward returns or the name is assigned again, however early
 * the pieces' last readers (CPython frees a frame's locals at its return;
 * an assignment frees the old value once the new one is made). A ConvLSTM
 * cell run in a Python loop,
 *     for s in range(t):
 *         i, f, o, g = self.cell(torch.cat([x[:, s], h], 1)).chunk(4, 1)
 *         c = ...; h = ...
 * keeps the previous step's gate tensor until the next step's chunk
 * assigns i, f, o, g again: measured on torch 1.13 (held-out ho16_convlstm,
 * batch 8 under no_grad) two gate tensors are alive while the next step's
 * convolution runs. torch.onnx writes a chunk as a Split or, at opset 13
 * and later with sizes from the shape, as one Slice a piece, all reading t.
 *
 * Rule: in one frame (a module's own ops, or the root forward's), a Split
 * with two or more outputs, or two or more Slices, reading the result of
 * a module the frame called (so an activation, not the shape arithmetic a
 * Slice also reads: this stage runs before shapes are known), every piece
 * read and no piece read by a Concat alone (torch.roll's export: two
 * Slices concatenated, one op in PyTorch). Each piece is a name (`local`: held until the frame returns),
 * unless the same chunk runs again later in the frame on the next call of
 * the same module or the next element of the same container (an unrolled
 * loop): then each piece is re-bound by its counterpart there (rebound_by).
 * nn.MultiheadAttention's frame is mha.c's, whose names are known.
 *
 * And a module called again in a loop: see stored_results. */
#include <stdlib.h>
#include <string.h>

#include "canon/canon.h"
#include "util.h"

typedef struct Group {
    int src;      /* the chunked tensor */
    int frame;    /* scope of the frame that chunks it, -1: the root forward */
    int call;     /* the call scope that made src, seen from the frame (-1: none) */
    int first;    /* position of its first piece's node */
    int n;        /* pieces */
    int piece[8];
} Group;

/* The frame a node runs in: its module's forward, or the root forward for
 * the root's own ops (their module is the node name, "/Concat_1") */
static int frame_of(const MeGraph *g, const MeNode *n)
{
    return n->module && n->module[0] == '/' ? -1 : n->scope;
}

/* The call, seen from frame f, that node p's op belongs to: the child of f
 * holding p's scope, or the element of a container child (a ModuleList
 * the frame iterates); -1 when p is f's own op */
static int call_of(const MeGraph *g, int f, int p)
{
    if (p < 0) return -1;
    int s = g->n[p].scope, depth = f >= 0 ? g->scopes[f].depth + 1 : 0;
    if (frame_of(g, &g->n[p]) == f || s < 0 || g->scopes[s].depth < depth) return -1;
    while (g->scopes[s].depth > depth) {
        int up = g->scopes[s].parent;
        if (g->scopes[up].depth == depth && g->scopes[up].uncalled) break; /* s is the element */
        s = up;
    }
    int top = s;
    while (g->scopes[top].depth > depth) top = g->scopes[top].parent;
    return (f < 0 ? g->scopes[top].parent < 0 : g->scopes[top].parent == f) ? s : -1;
}

/* The length of a scope name without TorchScript's call number: a
 * module's later calls are "pool_1", "pool_2" (the loaders number a
 * torch.export file's calls the same way) */
static size_t call_base(const char *name)
{
    size_t n = strlen(name), k = n;
    while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9') k--;
    return k < n && k > 1 && name[k - 1] == '_' ? k - 1 : n;
}

/* Whether call b is call a again: the same module (a stored tensor both
 * read, or TorchScript's numbering of a module's later calls, for one that
 * has no parameters: a MaxPool) or the next element of the container both
 * belong to */
static bool same_place(const MeGraph *g, const int *weight, int a, int b)
{
    if (a < 0 || b < 0 || a == b) return false;
    int pa = g->scopes[a].parent, pb = g->scopes[b].parent;
    if (pa == pb && pa >= 0 && g->scopes[pa].uncalled) return true;
    if (weight[a] >= 0 || weight[b] >= 0) return weight[a] == weight[b];
    const char *na = g->scopes[a].name, *nb = g->scopes[b].name;
    size_t la = call_base(na), lb = call_base(nb);
    return pa == pb && la == lb && !strncmp(na, nb, la);
}

/* A piece of a chunk: read (or returned), and not only by one Concat
 * (torch.roll's export: two Slices concatenated, one op in PyTorch) */
static bool chunk_piece(const MeGraph *g, int v)
{
    if (v < 0) return false;
    if (g->v[v].is_output || g->v[v].n_uses > 1) return true;
    if (g->v[v].n_uses != 1) return false;
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < g->n[i].n_in; k++)
            if (g->n[i].in[k] == v) return !me_canon_is(g, &g->n[i], "Concat");
    return false;
}

/* A module called again in a loop (SegNet's `x, i = self.pool(stage(x));
 * idx.append(i)`): a result of one call that the frame reads after the
 * next call has run was stored by the frame, in a container or a name the
 * loop does not re-bind, and lives until the frame returns (memory.c's
 * loop_frame says the same of a ModuleList's elements). */
static int stored_results(MeGraph *g, const int *weight)
{
    int *pos = me_malloc(sizeof(int) * (size_t)(g->nn + 1)), *first = me_malloc(sizeof(int) * (size_t)(g->nscopes + 1));
    int *nextc = me_malloc(sizeof(int) * (size_t)(g->nscopes + 1)), *calls = me_malloc(sizeof(int) * (size_t)(g->nscopes + 1));
    int rc = pos && first && nextc && calls ? 0 : ME_ENOMEM;
    for (int oi = 0; rc == 0 && oi < g->nn; oi++) pos[g->order[oi]] = oi;
    for (int s = 0; rc == 0 && s < g->nscopes; s++) first[s] = nextc[s] = -1;
    for (int oi = g->nn - 1; rc == 0 && oi >= 0; oi--) {
        int s = g->n[g->order[oi]].scope;
        for (; s >= 0; s = g->scopes[s].parent) first[s] = oi;
    }
    /* each call's next call of the same module (not a container's next
     * element: memory.c's loop_frame keeps those), among the scopes that
     * are calls of their parent */
    int nc = 0;
    for (int s = 0; rc == 0 && s < g->nscopes; s++)
        if (first[s] >= 0 && !g->scopes[s].uncalled) calls[nc++] = s;
    for (int a = 0; rc == 0 && a < nc; a++)
        for (int b = 0; b < nc; b++) {
            int x = calls[a], y = calls[b];
            int px = g->scopes[x].parent;
            if (first[y] > first[x] && px == g->scopes[y].parent && !(px >= 0 && g->scopes[px].uncalled) &&
                same_place(g, weight, x, y) && (nextc[x] < 0 || first[y] < first[nextc[x]]))
                nextc[x] = y;
        }
    for (int i = 0; rc == 0 && i < g->nn; i++) {
        const MeNode *r = &g->n[i];
        for (int k = 0; k < r->n_in; k++) {
            int v = r->in[k], p = v >= 0 ? g->v[v].producer : -1;
            if (p < 0 || g->v[v].local || g->v[v].rebound_by || r->scope < 0 || g->n[p].scope < 0) continue;
            /* the frame that passes v from its maker to its reader */
            int f = me_scope_common(g, g->n[p].scope, r->scope);
            if (f >= 0 && (f == g->n[p].scope || g->scopes[f].torch_mha)) continue;
            int c = call_of(g, f, p);
            if (c >= 0 && nextc[c] >= 0 && first[nextc[c]] < pos[i] && call_of(g, f, i) != c) g->v[v].local = true;
        }
    }
    me_free(calls);
    me_free(nextc);
    me_free(first);
    me_free(pos);
    return rc;
}

int me_canon_chunk(MeGraph *g, MeDiag *d)
{
    (void)d;
    if (!g->frames_unseen || !g->scopes || !g->nscopes) return 0; /* a loader that knows the names states them */
    int *weight = me_malloc(sizeof(int) * (size_t)(g->nscopes + 1)); /* scope → the first stored float tensor its subtree reads */
    Group *gr = NULL;
    int ng = 0, rc = 0;
    if (!weight) {
        rc = ME_ENOMEM;
        goto out;
    }
    for (int s = 0; s < g->nscopes; s++) weight[s] = -1;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        for (int k = 0; k < n->n_in && n->scope >= 0; k++) {
            int v = n->in[k], r = v >= 0 && g->v[v].kind == ME_V_INIT && me_dtype_is_float(g->v[v].dtype) ? me_canon_identity_root(g, v) : -1;
            if (r >= 0 && (weight[n->scope] < 0 || r < weight[n->scope])) weight[n->scope] = r;
        }
    }
    /* over each scope's subtree (scopes come after their parents): two
     * calls of one module read the same stored tensors, two modules do not */
    for (int s = g->nscopes - 1; s >= 0; s--) {
        int q = g->scopes[s].parent;
        if (q >= 0 && weight[s] >= 0 && (weight[q] < 0 || weight[s] < weight[q])) weight[q] = weight[s];
    }
    /* the chunks, in run order */
    for (int oi = 0; oi < g->nn && rc == 0; oi++) {
        int i = g->order[oi];
        const MeNode *n = &g->n[i];
        bool split = me_canon_is(g, n, "Split"), slice = me_canon_is(g, n, "Slice");
        if ((!split && !slice) || n->n_in < 1 || n->in[0] < 0) continue;
        int src = n->in[0], f = frame_of(g, n);
        const MeValue *t = &g->v[src];
        if (t->kind == ME_V_INIT || (f >= 0 && g->scopes[f].torch_mha)) continue;
        Group *cur = NULL;
        if (slice)
            for (int k = ng - 1; k >= 0 && !cur; k--)
                if (gr[k].src == src && gr[k].frame == f && gr[k].n < 8 && gr[k].n >= 1 && g->v[gr[k].piece[0]].producer >= 0 &&
                    me_canon_is(g, &g->n[g->v[gr[k].piece[0]].producer], "Slice"))
                    cur = &gr[k];
        if (!cur) {
            Group *ng2 = me_realloc(gr, sizeof(Group) * (size_t)(ng + 1));
            if (!ng2) { rc = ME_ENOMEM; break; }
            gr = ng2;
            cur = &gr[ng++];
            *cur = (Group){ .src = src, .frame = f, .call = call_of(g, f, t->producer), .first = oi };
        }
        for (int k = 0; k < n->n_out && cur->n < 8; k++)
            if (n->out[k] >= 0) cur->piece[cur->n++] = n->out[k];
    }
    for (int a = 0; a < ng && rc == 0; a++) {
        Group *x = &gr[a];
        bool ok = x->n >= 2 && x->call >= 0;
        for (int k = 0; ok && k < x->n; k++) ok = chunk_piece(g, x->piece[k]);
        if (!ok) continue;
        /* the same chunk on the next call of the same place: its pieces re-bind these */
        Group *next = NULL;
        for (int b = a + 1; b < ng && !next; b++)
            if (gr[b].frame == x->frame && gr[b].n == x->n && same_place(g, weight, x->call, gr[b].call)) next = &gr[b];
        for (int k = 0; k < x->n; k++) {
            MeValue *v = &g->v[x->piece[k]];
            if (next && !v->rebound_by) v->rebound_by = next->piece[k] + 1;
            else if (!next) v->local = true;
        }
    }
    if (rc == 0) rc = stored_results(g, weight);
out:
    me_free(gr);
    me_free(weight);
    return rc;
}
