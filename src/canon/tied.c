/* Tied weights: a language model whose output head shares the embedding
 * table (GPT-2, BERT's MLM head: lm_head.weight is wte.weight) has one
 * Parameter in PyTorch. An eval export folds the head's weight.t() into
 * a new initializer ("onnx::MatMul_123", [hidden, vocab]) beside the table
 * the Gather reads ([vocab, hidden]): read as written, the model holds the
 * weights twice (+157 MB on GPT-2), and twice the gradients and optimizer
 * state. Weight bytes are never read, so the rule decides from names,
 * shapes and use:
 *
 *   a Linear or Gemm weight C that is a stored float tensor whose name the
 *   exporter made up (not a module path: "onnx::..." or no '.' in it), of
 *   the table's dtype, whose shape is the table's reversed (a transpose:
 *   Linear with weight_in_out, Gemm without transB) or equal (a copy:
 *   Linear [out, in], Gemm with transB), where exactly one token table has
 *   that shape: a stored tensor read as a Gather's data with indices that
 *   are a graph input (input_ids), through reshapes and casts at most.
 *   Position tables (indices computed by Range) are not token tables: a
 *   folded [hidden, hidden] projection of a model whose context equals its
 *   width has their shape and must stay its own parameter.
 *
 * is that table. The node then reads the table itself (as PyTorch's
 * at::linear(x, wte.weight) does), so C has no reader and is counted
 * nowhere. What it cannot tell: an untied head exported the same way
 * (its own lm_head.weight folded into an exporter-named copy) looks the
 * same; a note says what was assumed and how to make the file say it
 * (export with do_constant_folding=False keeps the head's own parameter,
 * by its name, which this rule never merges). */
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"

static bool stored_float(const MeGraph *g, int v)
{
    return v >= 0 && g->v[v].kind == ME_V_INIT && me_dtype_is_float(g->v[v].dtype) && !g->v[v].sparse && g->v[v].shape.rank == 2;
}

/* Indices fed by a graph input, through shape-only ops at most. */
static bool from_input(const MeGraph *g, int v)
{
    static const char *const through[] = { "Cast", "Reshape", "Flatten", "Unsqueeze", "Squeeze", "Identity" };
    for (int hops = 0; v >= 0 && hops < 16; hops++) {
        if (g->v[v].kind == ME_V_INPUT) return true;
        int p = g->v[v].producer;
        if (p < 0 || g->n[p].n_in < 1) return false;
        bool ok = false;
        for (size_t k = 0; k < sizeof(through) / sizeof(through[0]) && !ok; k++) ok = me_canon_is(g, &g->n[p], through[k]);
        if (!ok) return false;
        v = g->n[p].in[0];
    }
    return false;
}

/* A name the exporter made: a folded constant, not a module's parameter. */
static bool exporter_named(const char *s)
{
    return !strncmp(s, "onnx::", 6) || !strchr(s, '.');
}

/* The one embedding table of shape [r0, r1] and c's dtype; -1 if none,
 * -2 if several. */
static int table_of(const MeGraph *g, const int *tables, int ntables, int c, int64_t r0, int64_t r1)
{
    int found = -1;
    for (int k = 0; k < ntables; k++) {
        int v = tables[k];
        if (v == c || g->v[v].dtype != g->v[c].dtype) continue;
        if (g->v[v].shape.d[0] != r0 || g->v[v].shape.d[1] != r1) continue;
        found = found == -1 ? v : -2;
    }
    return found;
}

int me_canon_tied(MeGraph *g, MeDiag *d)
{
    bool *table = me_calloc((size_t)g->nv + 1, 1);
    int *tables = me_malloc(sizeof(int) * (size_t)(g->nv + 1));
    int ntables = 0, rc = 0, tied = 0;
    if (!table || !tables) { me_free(table); me_free(tables); return ME_ENOMEM; }
    for (int i = 0; i < g->nn; i++) {
        const MeNode *n = &g->n[i];
        if (n->n_in >= 2 && me_canon_is(g, n, "Gather") && stored_float(g, n->in[0]) && !table[n->in[0]] && me_attr_i(n, "axis", 0) == 0
            && from_input(g, n->in[1])) {
            table[n->in[0]] = true;
            tables[ntables++] = n->in[0];
        }
    }
    for (int i = 0; ntables && i < g->nn; i++) {
        MeNode *n = &g->n[i];
        bool linear = me_canon_is(g, n, "Linear"), gemm = !linear && me_canon_is(g, n, "Gemm");
        if (!(linear || gemm) || n->n_in < 2) continue;
        int c = n->in[1];
        if (!stored_float(g, c) || table[c] || !exporter_named(g->v[c].name)) continue;
        /* does the node read C as [out, in] (a copy of the table) or as
         * [in, out] (its transpose)? */
        bool transposed = linear ? me_attr_i(n, "weight_in_out", 0) != 0 : me_attr_i(n, "transB", 0) == 0;
        const MeShape *s = &g->v[c].shape;
        int t = transposed ? table_of(g, tables, ntables, c, s->d[1], s->d[0]) : table_of(g, tables, ntables, c, s->d[0], s->d[1]);
        char en[256], ec[256], et[256]; /* names from the file, escaped for every report */
        me_escape(n->name, en, sizeof(en));
        me_escape(g->v[c].name, ec, sizeof(ec));
        if (t == -2) {
            rc = me_graph_add_note(g, "tied_weights", ME_NOTE_ALWAYS,
                                   "node '%s': weight '%s' has the shape of more than one embedding table; "
                                   "counted as its own parameter (memest cannot tell which, if any, it is tied to)",
                                   en, ec);
            if (rc < 0) break;
            continue;
        }
        if (t < 0) continue;
        n->in[1] = t;
        tied++;
        if (transposed) {
            /* the node now reads the table as nn.Linear holds it: [out, in] */
            for (int k = 0; k < n->n_attr; k++) {
                MeAttr *a = &n->attr[k];
                if (linear && !strcmp(a->name, "weight_in_out")) a->i = 0;
                if (gemm && !strcmp(a->name, "transB")) a->i = 1;
            }
            if (gemm && !me_node_attr(n, "transB")) {
                MeAttr *a = me_node_add_attr(n, "transB", ME_A_INT);
                if (!a) { rc = ME_ENOMEM; break; }
                a->i = 1;
            }
        }
        /* what the other reading costs, so that an untied head's
         * under-count is stated, not silent */
        uint64_t numel = me_smul((uint64_t)s->d[0], (uint64_t)s->d[1]);
        uint64_t bytes = me_smul(numel, (uint64_t)me_dtype_size(g->v[c].dtype));
        rc = me_graph_add_note(g, "tied_weights", ME_NOTE_ALWAYS,
                               "'%s' (node '%s') is taken as %s of the embedding table '%s': one parameter, counted once "
                               "(weights, gradients, optimizer state); the file cannot show which: if this head is not tied, "
                               "the model has %llu more parameters (%llu bytes of weights, and their gradients and optimizer "
                               "state in training) than reported; export with do_constant_folding=False so that the head "
                               "keeps its own parameter's name",
                               ec, en, transposed ? "the transpose" : "a copy", me_escape(g->v[t].name, et, sizeof(et)),
                               (unsigned long long)numel, (unsigned long long)bytes);
        if (rc < 0) break;
    }
    me_free(table);
    me_free(tables);
    if (rc < 0 || !tied) return rc;
    return me_graph_finalize(g, d); /* use counts: the copy has no reader now */
}
