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
    bool slices;  /* Slices (one a piece), not a Split */
    int src;      /* the chunked tensor */
    int frame;    /* scope of the frame that chunks it, -1: the root forward */
    int call;     /* the call scope that made src, seen from the frame (-1: none) */
    int first;    /* position of its first piece's node */
    int n;        /* pieces */
    int piece[8];
} Group;

/* The frame a node runs in: its module's forward, or the root forward (-1) */
static int frame_of(const MeGraph *g, const MeNode *n)
{
    (void)g;
    return me_node_root_op(n) ? -1 : n->scope;
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

/* Where a call is, for "the same call again": the same module (the first
 * stored tensor its subtree reads; for one without parameters, a MaxPool,
 * TorchScript's numbering of its later calls, pool_1, under one parent)
 * or, with elements, the container they belong to (its next element) */
typedef struct Place {
    int kind;         /* 0 a container's element, 1 a module by its parameters, 2 by its name */
    int key;          /* the container, the stored tensor, the parent */
    int parent;       /* kind 1: the scope calling it (a module and its first child read one tensor first) */
    const char *name; /* kind 2: the name without its call number */
    size_t len;
    int frame, n;     /* a chunk's frame and pieces (0 for a call): chunks of one place match on both */
    int first;        /* the call's first position */
    int id;           /* the call's scope, or the chunk's group */
} Place;

static Place place_of(const MeGraph *g, const int *weight, int s)
{
    int p = g->scopes[s].parent;
    if (p >= 0 && g->scopes[p].uncalled) return (Place){ .kind = 0, .key = p };
    if (weight[s] >= 0) return (Place){ .kind = 1, .key = weight[s], .parent = p };
    return (Place){ .kind = 2, .key = p, .name = g->scopes[s].name, .len = me_call_base(g->scopes[s].name, NULL) };
}

static int place_cmp(const Place *a, const Place *b)
{
    if (a->frame != b->frame) return a->frame < b->frame ? -1 : 1;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    if (a->kind != b->kind) return a->kind - b->kind;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->parent != b->parent) return a->parent < b->parent ? -1 : 1;
    if (a->kind == 2) {
        if (a->len != b->len) return a->len < b->len ? -1 : 1;
        int c = strncmp(a->name, b->name, a->len);
        if (c) return c;
    }
    return 0;
}

static int by_place_then_first(const void *x, const void *y)
{
    const Place *a = x, *b = y;
    int c = place_cmp(a, b);
    return c ? c : (a->first > b->first) - (a->first < b->first);
}

/* A piece of a chunk: read (or returned), and not only by one Concat
 * (torch.roll's export: two Slices concatenated, one op in PyTorch);
 * reader: a node reading each value */
static bool chunk_piece(const MeGraph *g, const int *reader, int v)
{
    if (v < 0) return false;
    if (g->v[v].is_output || g->v[v].n_uses > 1) return true;
    return g->v[v].n_uses == 1 && reader[v] >= 0 && !me_canon_is(g, &g->n[reader[v]], "Concat");
}

/* A module called again in a loop (SegNet's `x, i = self.pool(stage(x));
 * idx.append(i)`): a result of one call that the frame reads after the
 * next call has run was stored by the frame, in a container or a name the
 * loop does not re-bind, and lives until the frame returns (memory.c's
 * loop_frame says the same of a ModuleList's elements). */
static int stored_results(MeGraph *g, const int *weight)
{
    int *pos = me_malloc(sizeof(int) * (size_t)(g->nn + 1)), *first = me_malloc(sizeof(int) * (size_t)(g->nscopes + 1));
    int *nextc = me_malloc(sizeof(int) * (size_t)(g->nscopes + 1));
    int rc = pos && first && nextc ? 0 : ME_ENOMEM;
    for (int oi = 0; rc == 0 && oi < g->nn; oi++) pos[g->order[oi]] = oi;
    for (int s = 0; rc == 0 && s < g->nscopes; s++) first[s] = nextc[s] = -1;
    for (int oi = g->nn - 1; rc == 0 && oi >= 0; oi--) {
        int s = g->n[g->order[oi]].scope;
        for (; s >= 0; s = g->scopes[s].parent) first[s] = oi;
    }
    /* each call's next call of the same module (not a container's next
     * element: memory.c's loop_frame keeps those), among the scopes that
     * are calls (the root forward's own ops, "/Add", are none) */
    Place *pl = rc == 0 ? me_malloc(sizeof(Place) * (size_t)(g->nscopes + 1)) : NULL;
    int nc = 0;
    if (rc == 0 && !pl) rc = ME_ENOMEM;
    for (int s = 0; rc == 0 && s < g->nscopes; s++) {
        if (first[s] < 0 || g->scopes[s].uncalled || g->scopes[s].name[0] == '/') continue;
        Place x = place_of(g, weight, s);
        if (x.kind == 0) continue;
        x.first = first[s];
        x.id = s;
        pl[nc++] = x;
    }
    if (nc) qsort(pl, (size_t)nc, sizeof(Place), by_place_then_first);
    for (int a = 0; a + 1 < nc; a++)
        if (!place_cmp(&pl[a], &pl[a + 1])) nextc[pl[a].id] = pl[a + 1].id;
    me_free(pl);
    for (int i = 0; rc == 0 && i < g->nn; i++) {
        const MeNode *r = &g->n[i];
        for (int k = 0; k < r->n_in; k++) {
            int v = r->in[k], p = v >= 0 ? g->v[v].producer : -1;
            if (p < 0 || g->v[v].local || g->v[v].rebound_by || r->scope < 0 || g->n[p].scope < 0) continue;
            /* the frame that passes v from its maker to its reader */
            int f = me_scope_common(g, g->n[p].scope, r->scope);
            if (f >= 0 && (f == g->n[p].scope || g->scopes[f].torch_mha)) continue;
            int c = call_of(g, f, p), rd = call_of(g, f, i);
            /* read by the next call itself: the loop's carried value
             * (`x = self.layer(x)`), which that call's own hold keeps */
            if (c >= 0 && nextc[c] >= 0 && first[nextc[c]] < pos[i] && rd != c && rd != nextc[c]) g->v[v].local = true;
        }
    }
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
    /* the chunks, in run order; bysrc: a value's latest group of Slices */
    int *bysrc = me_malloc(sizeof(int) * (size_t)(g->nv + 1)), *reader = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    if (!bysrc || !reader) {
        me_free(bysrc);
        me_free(reader);
        rc = ME_ENOMEM;
        goto out;
    }
    for (int v = 0; v < g->nv; v++) bysrc[v] = reader[v] = -1;
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < g->n[i].n_in; k++)
            if (g->n[i].in[k] >= 0) reader[g->n[i].in[k]] = i;
    for (int oi = 0; oi < g->nn && rc == 0; oi++) {
        int i = g->order[oi];
        const MeNode *n = &g->n[i];
        bool split = me_canon_is(g, n, "Split"), slice = me_canon_is(g, n, "Slice");
        if ((!split && !slice) || n->n_in < 1 || n->in[0] < 0) continue;
        int src = n->in[0], f = frame_of(g, n);
        const MeValue *t = &g->v[src];
        if (t->kind == ME_V_INIT || (f >= 0 && g->scopes[f].torch_mha)) continue;
        Group *cur = slice && bysrc[src] >= 0 && gr[bysrc[src]].frame == f && gr[bysrc[src]].slices && gr[bysrc[src]].n < 8
                   ? &gr[bysrc[src]] : NULL;
        if (!cur) {
            Group *ng2 = me_realloc(gr, sizeof(Group) * (size_t)(ng + 1));
            if (!ng2) { rc = ME_ENOMEM; break; }
            gr = ng2;
            cur = &gr[ng++];
            *cur = (Group){ .src = src, .frame = f, .call = call_of(g, f, t->producer), .first = oi, .slices = slice };
            if (slice) bysrc[src] = ng - 1;
        }
        for (int k = 0; k < n->n_out && cur->n < 8; k++)
            if (n->out[k] >= 0) cur->piece[cur->n++] = n->out[k];
    }
    /* the chunks whose pieces are names, by frame, size and place, then in run order:
     * each one's next at the same place re-binds its pieces */
    Place *pl = rc == 0 ? me_malloc(sizeof(Place) * (size_t)(ng + 1)) : NULL;
    int np = 0;
    if (rc == 0 && !pl) rc = ME_ENOMEM;
    for (int a = 0; a < ng && rc == 0; a++) {
        Group *x = &gr[a];
        bool ok = x->n >= 2 && x->call >= 0;
        for (int k = 0; ok && k < x->n; k++) ok = chunk_piece(g, reader, x->piece[k]);
        if (!ok) continue;
        pl[np] = place_of(g, weight, x->call);
        pl[np].frame = x->frame;
        pl[np].n = x->n;
        pl[np].first = x->first;
        pl[np++].id = a;
    }
    if (np) qsort(pl, (size_t)np, sizeof(Place), by_place_then_first);
    for (int a = 0; a < np; a++) {
        const Group *x = &gr[pl[a].id];
        const Group *next = a + 1 < np && !place_cmp(&pl[a], &pl[a + 1]) ? &gr[pl[a + 1].id] : NULL;
        for (int k = 0; k < x->n; k++) {
            MeValue *v = &g->v[x->piece[k]];
            if (next && !v->rebound_by) v->rebound_by = next->piece[k] + 1;
            else if (!next) v->local = true;
        }
    }
    me_free(pl);
    me_free(bysrc);
    me_free(reader);
    if (rc == 0) rc = stored_results(g, weight);
out:
    me_free(gr);
    me_free(weight);
    return rc;
}
