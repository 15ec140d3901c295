/* Weights listed as graph inputs. A file may carry a model's parameters as
 * graph inputs with no initializer (torch.onnx.export(export_params=False)
 * writes every parameter and buffer so, beside the real inputs): read as
 * written, they are data the user must feed, the model has no parameters
 * and --input binds the wrong tensors. The data is not in the file, but
 * the slots that read them say what they are:
 *
 *   a float graph input of a fully static shape is a stored tensor when
 *   a node reads it (through Identity nodes at most, or inside an If/Loop
 *   body: onnx.c capture_names) in a weight or buffer slot of its op (Conv/Gemm weight and bias, a norm's scale, bias and
 *   running statistics: roles 'w' and 'b'), as MatMul's 2-d right operand
 *   when the left one is computed or a graph input of rank 3 or more (a
 *   folded nn.Linear weight: at::linear on a 2-d input is Gemm, so
 *   MatMul(a, b) of two 2-d inputs is taken as data, torch.mm), as a
 *   Gather's table with integer indices (nn.Embedding), or as the addend
 *   of such a MatMul's, Conv's or Gemm's output (a bias). Once the file is
 *   known to list weights as inputs, an input named as a module's state
 *   ("ln.weight": a dotted path whose last segment is not a number, as
 *   "input.1" is) is one too: LayerNorm's scale and shift read by Mul/Add.
 *
 * Such an input becomes a stored tensor whose contents are unknown; roles
 * (shape.c) then make it a parameter or a buffer, like an initializer, and
 * the graph's inputs are the rest. A note says so. */
#include <stdio.h>
#include <string.h>

#include "load/load.h"
#include "ops/ops.h"

static bool candidate(const MeGraph *g, int v)
{
    if (v < 0) return false;
    const MeValue *x = &g->v[v];
    if (x->kind != ME_V_INPUT || !me_dtype_is_float(x->dtype) || x->shape.rank < 1) return false;
    for (int k = 0; k < x->shape.rank; k++)
        if (x->shape.d[k] < 0 || (x->sym && x->sym[k])) return false;
    return true;
}

static const MeOpDesc *desc_of(const MeGraph *g, const MeNode *n)
{
    return me_op_find(n->op, n->domain, g->opset);
}

int me_load_weight_inputs(MeGraph *g, const int *body_weights, int n_body, MeDiag *d)
{
    (void)d;
    bool any = false;
    for (int k = 0; k < g->n_inputs && !any; k++) any = candidate(g, g->inputs[k]);
    if (!any) return 0;
    bool *w = me_calloc((size_t)g->nv + 1, 1);
    int *src = me_malloc(sizeof(int) * ((size_t)g->nv + 1));        /* value -> itself, or the input an Identity chain passes on */
    int *prod = me_malloc(sizeof(int) * ((size_t)g->nv + 1));       /* producers (the graph's links are made later, by finalize) */
    const MeOpDesc **desc = me_calloc((size_t)g->nn + 1, sizeof(*desc)); /* per node */
    if (!w || !src || !prod || !desc) { me_free(w); me_free(src); me_free(prod); me_free(desc); return ME_ENOMEM; }
    for (int v = 0; v < g->nv; v++) prod[v] = -1;
    for (int i = 0; i < g->nn; i++) {
        desc[i] = desc_of(g, &g->n[i]);
        for (int k = 0; k < g->n[i].n_out; k++)
            if (g->n[i].out[k] >= 0) prod[g->n[i].out[k]] = i;
    }
    /* nodes are in file order, which need not be topological: follow chains */
    for (int v = 0; v < g->nv; v++) {
        int s = v;
        for (int hops = 0; hops < 64; hops++) {
            int p = prod[s];
            if (p < 0 || !desc[p] || strcmp(desc[p]->name, "Identity") || g->n[p].n_in < 1 || g->n[p].in[0] < 0) break;
            s = g->n[p].in[0];
        }
        src[v] = s;
    }
#define SRC(v) ((v) >= 0 ? src[v] : -1)
    int found = 0;
    for (int k = 0; k < n_body; k++) /* read in a weight slot inside an If/Loop body */
        if (body_weights[k] >= 0 && body_weights[k] < g->nv && candidate(g, body_weights[k]) && !w[body_weights[k]]) {
            w[body_weights[k]] = true;
            found++;
        }
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        const MeOpDesc *dsc = desc[i];
        if (!dsc || !strcmp(dsc->name, "Identity")) continue;
        for (int k = 0; k < n->n_in; k++) {
            int v = SRC(n->in[k]);
            if (!candidate(g, v) || w[v]) continue;
            char r = me_op_role(dsc, k);
            bool weight = r == 'w' || r == 'b';
            if (!weight && k == 1 && !strcmp(dsc->name, "MatMul") && g->v[v].shape.rank == 2) {
                int a = SRC(n->in[0]);
                weight = a >= 0 && (g->v[a].kind != ME_V_INPUT || g->v[a].shape.rank > 2);
            }
            if (!weight && k == 0 && !strcmp(dsc->name, "Gather") && g->v[v].shape.rank == 2 && n->n_in >= 2 && n->in[1] >= 0) {
                MeDType it = g->v[n->in[1]].dtype;
                weight = it == ME_DT_I64 || it == ME_DT_I32;
            }
            if (weight) { w[v] = true; found++; }
        }
    }
    /* a bias added to a contraction whose weight is an input */
    for (int i = 0; found && i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (n->n_in != 2 || !desc[i] || (strcmp(desc[i]->name, "Add") && strcmp(desc[i]->name, "Sub"))) continue;
        for (int k = 0; k < 2; k++) {
            int v = SRC(n->in[k]), other = n->in[1 - k];
            int p = other >= 0 ? prod[other] : -1;
            if (!candidate(g, v) || w[v] || g->v[v].shape.rank != 1 || p < 0 || !desc[p] || g->n[p].n_in < 2) continue;
            MeCostClass cls = desc[p]->cls;
            int cw = SRC(g->n[p].in[1]);
            if ((cls == ME_C_MATMUL || cls == ME_C_LINEAR || cls == ME_C_CONV || cls == ME_C_CONVT) && cw >= 0 && w[cw]) {
                w[v] = true;
                found++;
            }
        }
    }
#undef SRC
    /* module state by its name, once the file is known to list weights as inputs */
    for (int k = 0; found && k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (candidate(g, v) && !w[v] && me_state_name(g->v[v].name)) { w[v] = true; found++; }
    }
    int rc = 0;
    if (found) {
        char first[3][128], list[420] = "";
        int kept = 0, shown = 0;
        for (int k = 0; k < g->n_inputs; k++) {
            int v = g->inputs[k];
            if (!w[v]) { g->inputs[kept++] = v; continue; }
            MeValue *x = &g->v[v];
            x->kind = ME_V_INIT;
            x->known = true;
            x->dims_default = false;
            if (shown < 3) {
                me_escape(x->name, first[shown], sizeof(first[shown]));
                size_t len = strlen(list);
                snprintf(list + len, sizeof(list) - len, "%s'%s'", shown ? ", " : "", first[shown]);
                shown++;
            }
        }
        g->n_inputs = kept;
        rc = me_graph_add_note(g, "weights_as_inputs", ME_NOTE_ALWAYS,
                               "%d graph input(s) with no data in the file (%s%s) are read as weights (a layer's weight or "
                               "bias, a norm's scale or running statistics, an embedding table): they are counted as the model's "
                               "parameters and buffers, not as inputs (the file was written without its weights, as "
                               "torch.onnx.export(export_params=False) does); --input binds the other %d input(s)",
                               found, list, found > 3 ? ", ..." : "", kept);
    }
    me_free(w);
    me_free(src);
    me_free(prod);
    me_free(desc);
    return rc;
}
