/* torch.chunk and torch.split written as one Slice a piece.
 *
 * torch.onnx writes a chunk of a dim the trace does not fix as Slices
 * (symbolic_opset11 prim_constant_chunk: the chunk size (dim + chunks - 1)
 * / chunks taken from Shape, piece i ending at size * (i + 1); opset 13's
 * split with sizes from the shape: each end is start + size), each piece
 * starting at the very value the previous one ended at. PyTorch ran one
 * chunk or split, whose backward (SplitBackward0, split_backward) cats the
 * pieces' gradients into one tensor of the input's size when the last
 * arrives; pieces sliced in Python (x[..., :h], x[..., h:]) are
 * SliceBackward0s, each making an input-sized gradient (zeros, the piece
 * copied in) that the engine adds up. The pieces are marked
 * ME_N_SPLIT_PIECE, and memory.c makes the one gradient.
 *
 * Rule: two or more Slices (opset 10 on) of one tensor along one axis,
 * steps 1, the first starting at 0 and each next starting at the same
 * graph value (not an equal constant) the previous one ended at, the
 * last not ending open (a Python x[..., h:] ends at INT64_MAX). */
#include <stdlib.h>

#include "canon/canon.h"
#include "util.h"

static bool slice_of(MeGraph *g, const MeNode *n, MeDiag *d)
{
    if (!me_canon_is(g, n, "Slice") || n->n_in < 3 || n->in[0] < 0 || n->in[1] < 0 || n->in[2] < 0) return false;
    double step = 1;
    return n->n_in < 5 || n->in[4] < 0 || (me_canon_scalar(g, n->in[4], &step, d) && step == 1);
}

/* the same axis: one value, or equal constants */
static bool same_axis(MeGraph *g, const MeNode *a, const MeNode *b, MeDiag *d)
{
    int x = a->n_in > 3 ? a->in[3] : -1, y = b->n_in > 3 ? b->in[3] : -1;
    if (x == y) return true;
    double u, v;
    return x >= 0 && y >= 0 && me_canon_scalar(g, x, &u, d) && me_canon_scalar(g, y, &v, d) && u == v;
}

typedef struct Key { int x, start, node; } Key;

static int key_cmp(const void *a, const void *b)
{
    const Key *p = a, *q = b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    if (p->start != q->start) return p->start < q->start ? -1 : 1;
    return (p->node > q->node) - (p->node < q->node);
}

int me_canon_split(MeGraph *g, MeDiag *d)
{
    int *next = me_malloc(sizeof(int) * (size_t)(g->nn + 1)); /* the piece starting where node i ends, -1 none */
    Key *keys = me_malloc(sizeof(Key) * (size_t)(g->nn + 1));  /* Slices by (tensor, start value) */
    if (!next || !keys) {
        me_free(next);
        me_free(keys);
        return ME_ENOMEM;
    }
    int nk = 0;
    for (int i = 0; i < g->nn; i++) {
        next[i] = -1;
        if (slice_of(g, &g->n[i], d)) keys[nk++] = (Key){ g->n[i].in[0], g->n[i].in[1], i };
    }
    qsort(keys, (size_t)nk, sizeof(Key), key_cmp);
    for (int k = 0; k < nk; k++) {
        const MeNode *n = &g->n[keys[k].node];
        int lo = 0, hi = nk; /* the first key at (x, n's end) */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            Key want = { n->in[0], n->in[2], -1 };
            if (key_cmp(&keys[mid], &want) < 0) lo = mid + 1;
            else hi = mid;
        }
        for (; lo < nk && keys[lo].x == n->in[0] && keys[lo].start == n->in[2]; lo++)
            if (keys[lo].node != keys[k].node && same_axis(g, n, &g->n[keys[lo].node], d)) {
                next[keys[k].node] = keys[lo].node;
                break;
            }
    }
    me_free(keys);
    for (int i = 0; i < g->nn; i++) {
        double start, end;
        const MeNode *n = &g->n[i];
        if (next[i] < 0 || !me_canon_scalar(g, n->in[1], &start, d) || start != 0) continue; /* next: a Slice's */
        int last = i, count = 1;
        while (next[last] >= 0 && count < g->nn) {
            last = next[last];
            count++;
        }
        if (me_canon_scalar(g, g->n[last].in[2], &end, d) && end >= 2147483647.0) continue; /* open: Python's x[..., h:] */
        for (int k = i, c = 0; c < count; k = next[k], c++) g->n[k].flags |= ME_N_SPLIT_PIECE;
    }
    me_free(next);
    return 0;
}

/* x[i] (qkv[0] after a permute: timm's attention) is select(): a view of
 * x, which torch.onnx writes as a Gather by a constant rank-0 index. Its
 * backward, select_backward, makes an input-sized zero gradient and
 * copies the piece in, as a Gather's does. */
int me_canon_select(MeGraph *g, MeDiag *d)
{
    for (int i = 0; i < g->nn; i++) {
        MeNode *n = &g->n[i];
        double v;
        if (!me_canon_is(g, n, "Gather") || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0) continue;
        const MeValue *idx = &g->v[n->in[1]];
        if (idx->shape.rank == 0 && me_canon_scalar(g, n->in[1], &v, d)) n->flags |= ME_N_SELECT;
    }
    return 0;
}
