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
 * nn.MultiheadAttention's frame is mha.c's, whose names are known. */
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

/* Whether call b is call a again: the same module (a stored tensor both
 * read) or the next element of the container both belong to */
static bool same_place(const MeGraph *g, const int *weight, int a, int b)
{
    if (a < 0 || b < 0 || a == b) return false;
    int pa = g->scopes[a].parent, pb = g->scopes[b].parent;
    if (pa == pb && pa >= 0 && g->scopes[pa].uncalled) return true;
    return weight[a] >= 0 && weight[a] == weight[b];
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

int me_canon_chunk(MeGraph *g, MeDiag *d)
{
    (void)d;
    if (!g->frames_unseen || !g->scopes || !g->nscopes) return 0; /* a loader that knows the names states them */
    int *weight = me_malloc(sizeof(int) * (size_t)(g->nscopes + 1)); /* scope → a stored float tensor its ops read */
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
            int v = n->in[k];
            if (v >= 0 && g->v[v].kind == ME_V_INIT && me_dtype_is_float(g->v[v].dtype) && weight[n->scope] < 0)
                weight[n->scope] = me_canon_identity_root(g, v);
        }
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
out:
    me_free(gr);
    me_free(weight);
    return rc;
}
