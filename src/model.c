/* Public entry points: load (any format) → bind → finalize → shapes, and
 * analyze (per-node cost under a convention, totals). */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "load/load.h"
#include "model.h"

const char *memest_version(void) { return "0.1.0"; }

static void copy_err(const MeDiag *d, char *err, size_t errlen)
{
    if (err && errlen) snprintf(err, errlen, "%s", d->msg[0] ? d->msg : "out of memory");
}

static bool looks_like_json(const char *path)
{
    size_t n = strlen(path);
    if (n >= 5 && !strcmp(path + n - 5, ".json")) return true;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    int ch;
    while ((ch = fgetc(f)) == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {}
    fclose(f);
    return ch == '{';
}

int memest_model_load(MemestModel **out, const char *path, const MemestLoadSettings *s, char *err, size_t errlen)
{
    MeDiag d = { 0 };
    *out = NULL;
    MemestModel *m = me_calloc(1, sizeof(*m));
    if (!m) { copy_err(&d, err, errlen); return ME_ENOMEM; }
    int rc = me_graph_init(&m->g, path);
    if (rc >= 0) rc = looks_like_json(path) ? me_load_json(&m->g, path, &d) : me_load_onnx(&m->g, path, &d);
    if (rc >= 0) rc = me_bind_inputs(&m->g, s, &d);
    if (rc >= 0) rc = me_graph_finalize(&m->g, &d);
    if (rc >= 0) rc = me_infer_shapes(&m->g, &d);
    if (rc < 0) {
        if (rc == ME_ENOMEM && !d.msg[0]) snprintf(d.msg, sizeof(d.msg), "%s: out of memory", path);
        copy_err(&d, err, errlen);
        memest_model_free(&m);
        return rc;
    }
    *out = m;
    return 0;
}

void memest_model_free(MemestModel **pm)
{
    if (!pm || !*pm) return;
    me_graph_free(&(*pm)->g);
    me_free((*pm)->cost);
    me_free((*pm)->rows);
    me_free((*pm)->hold_end);
    me_free((*pm)->series[0]);
    me_free((*pm)->series[1]);
    me_free(*pm);
    *pm = NULL;
}

/* Report rows. Default: one per node in execution order (Constant nodes,
 * which only hold data, are left out). torchstat: one per nn.Module, as its
 * hooks see them: functional calls are invisible, a module called twice is
 * one row at its first position holding its last call's figures. */
static int build_rows(MemestModel *m, MemestConvention conv)
{
    MeGraph *g = &m->g;
    me_free(m->rows);
    m->n_rows = 0;
    if (!(m->rows = me_malloc(sizeof(int) * (size_t)(g->nn ? g->nn : 1)))) return ME_ENOMEM;
    int *seen = NULL; /* scope → its row, torchstat */
    if (conv == MEMEST_CONVENTION_TORCHSTAT) {
        if (!(seen = me_malloc(sizeof(int) * (size_t)(g->nscopes ? g->nscopes : 1)))) return ME_ENOMEM;
        for (int i = 0; i < g->nscopes; i++) seen[i] = -1;
    }
    for (int oi = 0; oi < g->nn; oi++) {
        int ni = g->order[oi];
        const MeNode *n = &g->n[ni];
        if (me_node_is_constant(n)) continue;
        if (seen) {
            if (n->flags & ME_N_FUNCTIONAL) continue;
            if (seen[n->scope] >= 0) { m->rows[seen[n->scope]] = ni; continue; }
            seen[n->scope] = m->n_rows;
        }
        m->rows[m->n_rows++] = ni;
    }
    me_free(seen);
    return 0;
}

int memest_analyze(MemestModel *m, const MemestAnalyzeSettings *s, char *err, size_t errlen)
{
    MeDiag d = { 0 };
    MeGraph *g = &m->g;
    MemestConvention conv = s ? s->convention : MEMEST_CONVENTION_DEFAULT;
    if ((int)conv < 0 || conv >= MEMEST_CONVENTION_COUNT) {
        me_error(&d, ME_EINVAL, "unknown convention %d", (int)conv);
        copy_err(&d, err, errlen);
        return ME_EINVAL;
    }
    me_free(m->cost);
    m->cost = me_calloc((size_t)(g->nn ? g->nn : 1), sizeof(MeCost));
    if (!m->cost) { copy_err(&d, err, errlen); return ME_ENOMEM; }
    MemestTotals t = { .nodes = g->nn };
    void *region = m->cost;
    size_t len = sizeof(MeCost) * (size_t)g->nn;
    MePrefault *pf = g->nn > 100000 ? me_prefault_start(&region, &len, 1) : NULL;
    for (int ni = 0; ni < g->nn; ni++) {
        MeCtx c = { .g = g, .d = &d, .n = &g->n[ni] };
        me_convention_cost(conv, &c, &m->cost[ni]);
    }
    me_prefault_join(pf);
    if (build_rows(m, conv) < 0) { copy_err(&d, err, errlen); return ME_ENOMEM; }
    for (int r = 0; r < m->n_rows; r++) {
        int ni = m->rows[r];
        const MeCost *co = &m->cost[ni];
        t.output_bytes = me_sadd(t.output_bytes, co->out_bytes);
        if (co->status == ME_COST_UNCOUNTED) t.uncounted_nodes++;
        if (co->status != ME_COST_OK) continue;
        t.macs = me_sadd(t.macs, co->macs);
        t.flops = me_sadd(t.flops, co->flops);
        t.mem_read = me_sadd(t.mem_read, co->read);
        t.mem_write = me_sadd(t.mem_write, co->write);
    }
    /* The seed's "intermediate variables" view: every call's output, in-place
     * calls skipped (they write into their input). */
    for (int ni = 0; ni < g->nn; ni++)
        if (m->cost[ni].status == ME_COST_UNKNOWN_OP) t.unknown_nodes++;
    for (int ni = 0; ni < g->nn; ni++)
        if (!(g->n[ni].flags & ME_N_INPLACE) && !me_node_is_constant(&g->n[ni]))
            t.seed_sum_bytes = me_sadd(t.seed_sum_bytes, m->cost[ni].out_bytes);
    /* Parameters and buffers once each, however many nodes share them. */
    for (int i = 0; i < g->nv; i++) {
        const MeValue *v = &g->v[i];
        if (v->kind != ME_V_INIT || !v->n_uses) continue;
        int64_t n = me_shape_numel(&v->shape);
        if (n < 0) continue;
        if (v->role == ME_R_PARAM) {
            t.params = me_sadd(t.params, (uint64_t)n);
            t.param_bytes = me_sadd(t.param_bytes, me_smul((uint64_t)n, (uint64_t)me_dtype_size(v->dtype)));
        } else if (v->role == ME_R_BUFFER) {
            t.buffers = me_sadd(t.buffers, (uint64_t)n);
        }
    }
    if (s && s->strict && t.unknown_nodes) {
        for (int ni = 0; ni < g->nn; ni++)
            if (m->cost[ni].status == ME_COST_UNKNOWN_OP) {
                me_error(&d, ME_EUNSUPPORTED, "%s: node '%s': op '%s%s%s' is not supported (--strict); %d node(s) in all",
                         g->path, g->n[ni].name, g->n[ni].domain, *g->n[ni].domain ? "." : "", g->n[ni].op, t.unknown_nodes);
                break;
            }
        copy_err(&d, err, errlen);
        return ME_EUNSUPPORTED;
    }
    m->conv = conv;
    m->totals = t;
    m->analyzed = true;
    return 0;
}

int memest_freeze(MemestModel *m, const char *pattern)
{
    int hits = 0;
    size_t pl = strlen(pattern);
    for (int i = 0; i < m->g.nn; i++) {
        const char *mod = m->g.n[i].module;
        bool prefix = !strncmp(mod, pattern, pl) && (mod[pl] == 0 || mod[pl] == '.');
        if (prefix || !fnmatch(pattern, mod, 0)) {
            m->g.n[i].flags |= ME_N_FROZEN;
            hits++;
        }
    }
    return hits;
}

int memest_totals(const MemestModel *m, MemestTotals *out)
{
    if (!m || !m->analyzed) return ME_EINVAL;
    *out = m->totals;
    return 0;
}
