/* Deduplicated initializers. An exporter may store equal tensors once and
 * hand the copy to its readers through Identity nodes: torch.onnx (1.13,
 * DeduplicateInitializers) merges initializers that share storage (one
 * module called twice: one Parameter, one tensor) and, in an eval export,
 * initializers of equal value: two modules whose weights happen to be
 * equal (freshly built norms: all ones, all zeros; a copied layer) are two
 * Parameters in PyTorch, one tensor in the file, read as
 * Identity(fc1.weight) -> "fc2.weight".
 *
 * The file's count is what it holds: one tensor, counted once however many
 * Identity nodes pass it on (the Identity's output is a view, no stored
 * tensor; shape.c counts the initializer by its readers). What the file
 * cannot show is whether PyTorch had one tensor or several. An alias whose
 * name is a module's state ("fc2.weight", a dotted path, not the source's
 * name) names another Parameter: PyTorch holds it too, and a note says how
 * many elements the figures lack. Aliases with names the exporter made
 * ("onnx::MatMul_15": a folded transpose) may be the same Parameter read
 * twice or equal ones; the note counts them as "up to". A file with only
 * such aliases (an eval export's folded BatchNorm biases, equal zeros) gets
 * no note: nothing in it says PyTorch had more tensors. Contents are never
 * read. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"

/* Values some node reads in a buffer slot (BatchNorm's running statistics). */
static bool *buffer_reads(const MeGraph *g)
{
    bool *b = me_calloc((size_t)g->nv + 1, 1);
    if (!b) return NULL;
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        const MeOpDesc *dsc = me_canon_desc(g, n);
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && me_op_role(dsc, k) == 'b') b[n->in[k]] = true;
    }
    return b;
}

int me_canon_dedup(MeGraph *g, MeDiag *d)
{
    (void)d;
    bool *buf = NULL; /* made at the first alias that needs it: most graphs have none */
    uint64_t sure = 0, sure_buf = 0, maybe = 0;
    int n_sure = 0, n_maybe = 0, shown = 0;
    char list[480] = "";
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (!me_canon_is(g, n, "Identity") || n->n_in < 1 || n->n_out < 1 || n->in[0] < 0 || n->out[0] < 0) continue;
        int s = me_canon_identity_root(g, n->in[0]); /* the stored tensor, through Identity chains */
        const MeValue *src = &g->v[s], *alias = &g->v[n->out[0]];
        if (src->kind != ME_V_INIT || src->from_constant || !me_dtype_is_float(src->dtype) || !alias->n_uses) continue;
        int64_t numel = src->sparse ? src->nnz : me_shape_numel(&src->shape);
        if (numel <= 0 || !strcmp(src->name, alias->name)) continue;
        if (me_state_name(alias->name)) {
            if (!buf && !(buf = buffer_reads(g))) return ME_ENOMEM;
            if (buf[n->out[0]]) sure_buf = me_sadd(sure_buf, (uint64_t)numel);
            else sure = me_sadd(sure, (uint64_t)numel);
            n_sure++;
            if (shown < 3) {
                char ea[128], es[128];
                size_t len = strlen(list);
                snprintf(list + len, sizeof(list) - len, "%s'%s' = '%s'", shown ? ", " : "",
                         me_escape(alias->name, ea, sizeof(ea)), me_escape(src->name, es, sizeof(es)));
                shown++;
            }
        } else {
            maybe = me_sadd(maybe, (uint64_t)numel);
            n_maybe++;
        }
    }
    me_free(buf);
    if (!n_sure) return 0;
    char more[200] = "";
    if (n_maybe)
        snprintf(more, sizeof(more), "; %d more alias(es) with names the exporter made may be further equal Parameters "
                 "(up to %llu more elements) or one Parameter read twice", n_maybe, (unsigned long long)maybe);
    return me_graph_add_note(g, "deduplicated_initializers", ME_NOTE_ALWAYS,
                             "%d tensor(s) named as other parameters or buffers are read through Identity nodes from an equal initializer "
                             "(%s%s): the export stored equal tensors once (torch.onnx deduplicates initializers of equal "
                             "value in an eval export), and they are counted once, as the file holds them; PyTorch holds "
                             "each as its own tensor: %llu more parameters and %llu more buffer elements than reported%s",
                             n_sure, list, n_sure > 3 ? ", ..." : "", (unsigned long long)sure, (unsigned long long)sure_buf, more);
}
