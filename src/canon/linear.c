/* nn.Linear as exporters write it. torch.onnx writes F.linear as Gemm for
 * a 2-d input with bias and otherwise as MatMul(x, weight.t()) followed by
 * Add(bias): the transpose a Transpose node of the parameter (training
 * export, no constant folding) or folded into a new [in, out] initializer
 * ("onnx::MatMul_123", eval export). PyTorch ran one op, at::linear
 * (aten/src/ATen/native/Linear.cpp, v1.13): addmm for a 2-d input with
 * bias, and for a contiguous 3-d one through a view (_flatten_3d_linear);
 * otherwise matmul(input, weight.t()) and an in-place add_ of the bias.
 * Either way one output buffer, where MatMul + Add would be two, and every
 * counting tool (thop, ptflops, fvcore, DeepSpeed) saw one Linear module
 * call. The chain becomes one Linear node (src/ops/linear.c): inputs
 * (x, weight, bias), the weight either the parameter itself ([out, in]) or
 * the folded copy ([in, out], attribute weight_in_out = 1).
 *
 * Recognized: MatMul(x, W) with W a stored rank-2 float tensor or a
 * Transpose (perm [1, 0]) of one, x not stored; then, when the product's
 * only reader is an Add whose other operand is a stored rank-1 float tensor
 * of W's output size, that Add is the bias. A torch.matmul(x, P) on a
 * parameter P looks the same in the file and becomes a Linear too: the
 * figures agree (matmul without bias is what at::linear runs) except that
 * a following "+ b" would have been a second buffer in PyTorch
 * (doc/conventions-peers.md states the limit). */
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"
#include "util.h"

/* A module's parameter read by a call that is not that module's: the
 * weight or bias is named under the node's module scope but is not its own
 * ".weight"/".bias" (nn.MultiheadAttention's in_proj_weight/in_proj_bias,
 * or out_proj's that its forward passes to F.linear without calling
 * out_proj). Hook-based tools see no nn.Linear there. A tensor from
 * elsewhere (a tied head's table) or with a name the exporter made (an
 * eval export's folded weight.t(), "onnx::MatMul_N") says nothing, so the
 * bias decides when the weight was folded. */
static bool foreign_param(const MeGraph *g, const MeNode *n, int v, const char *own)
{
    if (v < 0) return false;
    const char *vn = g->v[v].name, *m = n->module;
    size_t lm = m ? strlen(m) : 0;
    if (!vn || !lm || strncmp(vn, m, lm) || vn[lm] != '.') return false;
    return strcmp(vn + lm, own) != 0;
}

static bool functional_use(const MeGraph *g, const MeNode *n, int w, int b)
{
    return foreign_param(g, n, w, ".weight") || foreign_param(g, n, b, ".bias");
}

static bool stored_float(const MeGraph *g, int v, int rank)
{
    if (v < 0) return false;
    const MeValue *x = &g->v[v];
    return x->kind == ME_V_INIT && me_dtype_is_float(x->dtype) && x->shape.rank == rank && !x->sparse;
}

/* Gemm n reads its module's own ".weight" as B untransposed (transB 0): the
 * module keeps its weight [in, out] and calls torch.addmm(bias, x, weight)
 * itself (transformers' Conv1D, GPT-2's layers). nn.Linear keeps [out, in]
 * and torch.onnx writes its F.linear as Gemm with transB 1 (or MatMul of a
 * Transpose), so this is no nn.Linear call: hook tools see no module they
 * know, and ptflops' patched torch.addmm counts it. An eval export's
 * folded copy has a name of its own and says nothing. */
static bool own_in_out(const MeGraph *g, const MeNode *n)
{
    int b = n->in[1];
    if (me_attr_i(n, "transB", 0) || me_attr_i(n, "transA", 0) || !stored_float(g, b, 2) || !n->module || !g->v[b].name)
        return false;
    /* the module's path, or its tail where a container the forward did not
     * call left no scope of its own (`self.transformer.h` iterated from the
     * outer forward: "transformer.h.0.attn.c_attn.weight" in "h.0.attn.c_attn") */
    const char *name = g->v[b].name;
    size_t lp = me_prefix_len(name, ".weight"), lm = strlen(n->module);
    if (lp < lm || strncmp(name + lp - lm, n->module, lm)) return false;
    return lp == lm || name[lp - lm - 1] == '.';
}

/* The parameter behind MatMul's B: B itself (*in_out = 1) or the input of
 * a plain 2-d Transpose (*in_out = 0, *tr = that node); -1 if neither. */
static int weight_of(const MeGraph *g, int b, int *in_out, int *tr)
{
    *tr = -1;
    if (stored_float(g, b, 2)) {
        *in_out = 1;
        return b;
    }
    int p = b >= 0 ? g->v[b].producer : -1;
    if (p < 0 || g->v[b].kind != ME_V_ACT || !me_canon_is(g, &g->n[p], "Transpose") || g->n[p].n_in != 1) return -1;
    const MeAttr *perm = me_node_attr(&g->n[p], "perm");
    if (perm && (perm->type != ME_A_INTS || perm->n != 2 || perm->ints[0] != 1 || perm->ints[1] != 0)) return -1;
    if (!stored_float(g, g->n[p].in[0], 2)) return -1;
    *in_out = 0;
    *tr = p;
    return g->n[p].in[0];
}

int me_canon_linear(MeGraph *g, MeDiag *d)
{
    /* the one node reading each value, -1 for none, -2 for several */
    int *reader = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    bool *gone = me_calloc((size_t)g->nn + 1, 1);
    int rc = 0, found = 0;
    if (!reader || !gone) { rc = ME_ENOMEM; goto end; }
    for (int v = 0; v < g->nv; v++) reader[v] = -1;
    for (int i = 0; i < g->nn; i++)
        for (int k = 0; k < g->n[i].n_in; k++) {
            int v = g->n[i].in[k];
            if (v >= 0) reader[v] = reader[v] == -1 ? i : -2;
        }
    for (int i = 0; i < g->nn; i++) {
        MeNode *mm = &g->n[i];
        /* a Gemm is at::linear of a 2-d input already: only whose call it was */
        if (mm->n_in >= 2 && me_canon_is(g, mm, "Gemm") && stored_float(g, mm->in[1], 2) &&
            functional_use(g, mm, mm->in[1], mm->n_in > 2 ? mm->in[2] : -1))
            mm->flags |= ME_N_FUNCTIONAL;
        if (mm->n_in >= 2 && me_canon_is(g, mm, "Gemm") && own_in_out(g, mm)) mm->flags |= ME_N_FUNCTIONAL | ME_N_ADDMM;
        if (gone[i] || mm->n_in != 2 || mm->n_out != 1 || mm->n_attr || !me_canon_is(g, mm, "MatMul")) continue;
        int x = mm->in[0], y = mm->out[0], bt = mm->in[1], in_out, tr;
        if (x < 0 || y < 0 || g->v[x].kind == ME_V_INIT) continue;
        int w = weight_of(g, bt, &in_out, &tr);
        if (w < 0) continue;
        int64_t nout = g->v[w].shape.d[in_out ? 1 : 0];
        /* the bias: the product's only reader adds a stored [out] vector */
        int add = g->v[y].is_output ? -1 : reader[y], b = -1;
        if (add >= 0 && g->n[add].n_in == 2 && g->n[add].n_out == 1 && !g->n[add].n_attr && me_canon_is(g, &g->n[add], "Add")) {
            int o = g->n[add].in[0] == y ? g->n[add].in[1] : g->n[add].in[0];
            if (o != y && stored_float(g, o, 1) && g->v[o].shape.d[0] == nout) b = o;
        }
        int at = b >= 0 ? add : i; /* the node that becomes the Linear */
        MeNode *n = &g->n[at];
        int *ins = me_arena_alloc(&g->arena, sizeof(int) * 3);
        char *op = me_graph_strdup(g, "Linear");
        MeAttr *a = in_out ? me_node_add_attr(n, "weight_in_out", ME_A_INT) : NULL;
        if (!ins || !op || (in_out && !a)) { rc = ME_ENOMEM; goto end; }
        if (a) a->i = 1;
        ins[0] = x;
        ins[1] = w;
        ins[2] = b;
        if (at != i) {
            /* the Add's slot, with the MatMul's name and place in the modules */
            n->name = mm->name;
            n->module = mm->module;
            n->scope = mm->scope;
            n->flags = mm->flags;
            gone[i] = true;
        }
        if (functional_use(g, n, w, b)) n->flags |= ME_N_FUNCTIONAL;
        n->op = op;
        n->domain = NULL;
        n->in = ins;
        n->n_in = b >= 0 ? 3 : 2;
        /* weight.t() is a view at::linear makes itself: the Transpose goes
         * when nothing else reads it */
        if (tr >= 0 && reader[bt] == i && !g->v[bt].is_output) gone[tr] = true;
        found++;
    }
    if (found) rc = me_graph_remove_nodes(g, gone, d);
end:
    me_free(reader);
    me_free(gone);
    return rc;
}
