/* torch.einsum's plan (src/ops/linear.c einsum_chain) against PyTorch:
 * golden/truth/einsum/plans.json, made by tests/oracle/measure_einsum.py
 * (torch 1.13 CPU), gives per call the operands' shapes and strides, the
 * bytes the call allocated in order, what autograd kept and the output's
 * strides. Each case becomes a one-node graph whose operands have those
 * strides; the chain must allocate the same tensors in the same order,
 * keep the same ones (every operand requiring grad) and leave the output
 * with the same strides (dims of size 1 carry none). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "ops/ops.h"

#include "../check.h"

static int64_t case_strides[8][ME_MAX_RANK];
static int case_in[8], case_n;

static const int64_t *strides_cb(const MeRunCtx *r, const MeValue *v, int64_t *tmp)
{
    for (int i = 0; i < case_n; i++)
        if (&r->c.g->v[case_in[i]] == v) return case_strides[i];
    me_shape_strides(&v->shape, tmp);
    return tmp;
}

static int ints(const cJSON *a, int64_t *out, int max)
{
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) if (n < max) out[n++] = (int64_t)x->valuedouble;
    return n;
}

static void run_case(int k, const cJSON *c)
{
    const char *eq = cJSON_GetStringValue(cJSON_GetObjectItem(c, "equation"));
    const cJSON *ops = cJSON_GetObjectItem(c, "operands");
    MeGraph g;
    MeDiag d = { 0 };
    me_graph_init(&g, "test_einsum_plan");
    g.opset = 17;
    case_n = cJSON_GetArraySize(ops);
    int ni;
    bool ok = eq && case_n > 0 && case_n <= 8 && me_graph_add_node(&g, "Einsum", "e", case_n, 1, &ni) >= 0;
    CHECK(ok, "case %d: not built", k);
    for (int i = 0; ok && i < case_n; i++) {
        const cJSON *o = cJSON_GetArrayItem(ops, i);
        char name[16];
        snprintf(name, sizeof(name), "in%d", i);
        int vi;
        ok = me_graph_value(&g, name, &vi) >= 0;
        if (!ok) break;
        MeValue *v = &g.v[vi];
        v->kind = ME_V_INPUT;
        v->dtype = ME_DT_F32;
        v->known = true;
        v->shape.rank = ints(cJSON_GetObjectItem(o, "shape"), v->shape.d, ME_MAX_RANK);
        ints(cJSON_GetObjectItem(o, "strides"), case_strides[i], ME_MAX_RANK);
        ok = me_graph_add_input(&g, vi) >= 0;
        g.n[ni].in[i] = case_in[i] = vi;
    }
    MeAttr *a = ok ? me_node_add_attr(&g.n[ni], "equation", ME_A_STRING) : NULL;
    ok = a && (a->s = me_strdup(eq)) && me_graph_value(&g, "out", &g.n[ni].out[0]) >= 0 && me_graph_add_output(&g, g.n[ni].out[0]) >= 0;
    ok = ok && me_graph_finalize(&g, &d) >= 0 && me_infer_shapes(&g, &d) >= 0 && g.n[ni].desc && g.n[ni].desc->chain;
    CHECK(ok, "case %d (%s): %s", k, eq ? eq : "?", d.msg);
    if (!ok) {
        me_graph_free(&g);
        return;
    }
    MeRunCtx r = { .c = { .g = &g, .n = &g.n[ni] }, .strides = strides_cb };
    MeChain ch;
    int planned = g.n[ni].desc->chain(&r, &ch);
    CHECK(planned == 1, "case %d (%s): not planned", k, eq);
    if (planned != 1) {
        me_graph_free(&g);
        return;
    }
    /* the tensors made, in order */
    int64_t want[64];
    int nw = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "events")) if (e->valuedouble > 0 && nw < 64) want[nw++] = (int64_t)e->valuedouble;
    bool same = nw == ch.n;
    for (int i = 0; same && i < nw; i++) same = want[i] == ch.s[i].numel * 4;
    char got[512] = "", exp[512] = "";
    for (int i = 0; i < ch.n; i++) snprintf(got + strlen(got), sizeof(got) - strlen(got), " %lld", (long long)(ch.s[i].numel * 4));
    for (int i = 0; i < nw; i++) snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), " %lld", (long long)want[i]);
    CHECK(same, "case %d (%s): allocates [%s ] where PyTorch allocated [%s ]", k, eq, got, exp);
    /* the output's strides */
    int64_t ost[ME_MAX_RANK];
    const MeValue *out = &g.v[g.n[ni].out[0]];
    int nr = ints(cJSON_GetObjectItem(c, "out_strides"), ost, ME_MAX_RANK);
    same = nr == out->shape.rank;
    for (int i = 0; same && i < nr; i++) same = out->shape.d[i] == 1 || ost[i] == ch.strides[i];
    CHECK(same, "case %d (%s): output strides differ from PyTorch's (first: %lld vs %lld)", k, eq,
          (long long)(nr ? ch.strides[0] : 0), (long long)(nr ? ost[0] : 0));
    /* what autograd keeps: operands by index, made tensors by bytes */
    int64_t kept_made[64], want_made[64];
    int nkm = 0, nwm = 0;
    bool kept_op[8] = { false }, want_op[8] = { false };
    for (int i = 0; i < ch.n; i++) {
        if (!ch.s[i].saves) continue;
        const int8_t ref[2] = { ch.s[i].a, ch.s[i].b };
        for (int j = 0; j < 2; j++) {
            if (ref[j] == ME_CHAIN_NONE) continue;
            if (ref[j] < 0) kept_op[-1 - ref[j]] = true;
            else if (nkm < 64) kept_made[nkm++] = ch.s[ref[j]].numel * 4;
        }
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "saved"))
    {
        const cJSON *op = cJSON_GetObjectItem(e, "operand");
        if (op) want_op[(int)op->valuedouble & 7] = true;
        else if (nwm < 64) want_made[nwm++] = (int64_t)cJSON_GetObjectItem(e, "bytes")->valuedouble;
    }
    same = nkm == nwm && !memcmp(kept_op, want_op, sizeof(kept_op));
    for (int i = 0; same && i < nwm; i++) { /* as multisets */
        int hits = 0, wants = 0;
        for (int j = 0; j < nwm; j++) {
            hits += kept_made[j] == want_made[i];
            wants += want_made[j] == want_made[i];
        }
        same = hits == wants;
    }
    CHECK(same, "case %d (%s): autograd keeps %d made tensor(s) where PyTorch kept %d, or other operands", k, eq, nkm, nwm);
    me_graph_free(&g);
}

int main(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/golden/truth/einsum/plans.json", argc > 1 ? argv[1] : ".");
    char *text = slurp(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK(root != NULL, "cannot read %s", path);
    const cJSON *cases = root ? cJSON_GetObjectItem(root, "cases") : NULL;
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) run_case(k++, c);
    CHECK(k >= 20, "only %d cases in %s", k, path);
    cJSON_Delete(root);
    free(text);
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
