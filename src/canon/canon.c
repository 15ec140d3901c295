#include <limits.h>
#include <string.h>

#include "canon/canon.h"
#include "ops/ops.h"
#include "util.h"

bool me_canon_is(const MeGraph *g, const MeNode *n, const char *name)
{
    /* the registry finds an op by its exact name: another name is another
     * op, without the lookup (run per node by every pass) */
    if (strcmp(n->op, name)) return false;
    const MeOpDesc *d = me_op_find(n->op, n->domain, (n->flags & ME_N_CANON) ? INT_MAX : g->opset);
    return d && !strcmp(d->name, name);
}

const MeOpDesc *me_canon_desc(const MeGraph *g, const MeNode *n)
{
    return n->desc ? n->desc : me_op_find(n->op, n->domain, (n->flags & ME_N_CANON) ? INT_MAX : g->opset);
}

int me_canon_identity_root(const MeGraph *g, int v)
{
    for (int hops = 0; hops < 64 && v >= 0; hops++) {
        int p = g->v[v].producer;
        if (p < 0 || g->v[v].kind == ME_V_INIT || !me_canon_is(g, &g->n[p], "Identity") || g->n[p].n_in < 1 || g->n[p].in[0] < 0)
            break;
        v = g->n[p].in[0];
    }
    return v;
}

int me_canon_calls_note(MeGraph *g, const char *code, int calls, const char *first, const char *noun, const char *rest)
{
    char e[256];
    return me_graph_add_note(g, code, ME_NOTE_ALWAYS, "%d %s ('%s'%s)%s", calls, noun, me_escape(first ? first : "", e, sizeof(e)),
                             calls > 1 ? ", ..." : "", rest);
}

int me_canonicalize(MeGraph *g, MeDiag *d)
{
    static int (*const passes[])(MeGraph *, MeDiag *) = {
#define ME_CANON_FN(name) me_canon_##name,
        ME_CANON_PASSES(ME_CANON_FN)
#undef ME_CANON_FN
    };
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++) {
        int rc = passes[i](g, d);
        if (rc < 0) return rc;
    }
    return 0;
}
