/* Adding an op is one descriptor in its family file plus its line in the
 * registry list. This file does exactly that for a fake op, FakeScale: the
 * descriptor below, and its line in ME_OPS_EXTRA, the registry list's
 * extension (this file compiles the library's src/ops/registry.c with it).
 * The op then shows in shape inference, in every convention's cost and in
 * the training timeline, where its saved tensors are counted. A versioned
 * fake op checks lookup by opset; a descriptor that forgot its autograd
 * rule fails validation naming the op. */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "ops/ops.h"

#include "../check.h"

/* --- the family file --- */

static int infer_fake(MeCtx *c) { return me_set_out(c, 0, me_in(c, 0)->dtype, me_in_shape(c, 0)); }

static void cost_fake(const MeCtx *c, MeOpCost *o)
{
    o->macs = (uint64_t)me_numel_out(c, 0);
    o->flops = me_smul(3, o->macs);
}

#define FAKE_EXTRA 4096 /* bytes of an extra tensor its forward keeps for backward */
static uint64_t fake_saved_extra(const MeCtx *c, bool training)
{
    (void)c;
    return training ? FAKE_EXTRA : 0;
}

const MeOpDesc me_op_fake_scale = {
    .name = "FakeScale", .since = 1, .min_in = 2, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xw", .cls = ME_C_ACT, .infer = infer_fake, .cost = cost_fake,
    .autograd = ME_AG_INPUT, .saved_extra = fake_saved_extra, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW,
    .peer = { [MEMEST_CONVENTION_PTFLOPS] = ME_PEER_FUNCTIONAL, [MEMEST_CONVENTION_DEEPSPEED] = ME_PEER_FUNCTIONAL },
};
const MeOpDesc me_op_fake_v5 = {
    .name = "FakeVersioned", .since = 5, .min_in = 1, .max_in = 1, .min_out = 1, .max_out = 1,
    .roles = "x", .cls = ME_C_ELTWISE, .infer = infer_fake, .cost = cost_fake,
    .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW,
};
const MeOpDesc me_op_fake_v13 = {
    .name = "FakeVersioned", .since = 13, .min_in = 1, .max_in = 2, .min_out = 1, .max_out = 1,
    .roles = "xc", .cls = ME_C_ELTWISE, .infer = infer_fake, .cost = cost_fake,
    .autograd = ME_AG_NONE, .autocast = ME_AC_FOLLOW, .autocast_cpu = ME_AC_FOLLOW,
};

/* --- the registry list --- */

#define ME_OPS_EXTRA(X) X(me_op_fake_scale) X(me_op_fake_v13) X(me_op_fake_v5)
#include "ops/registry.c"

/* --- the test --- */

static void test_registered(void)
{
    char why[256];
    CHECK(me_op_find("FakeScale", "", 17) == &me_op_fake_scale, "FakeScale not found");
    CHECK(me_op_validate(&me_op_fake_scale, why, sizeof(why)) == 0, "%s", why);
    for (int conv = 0; conv < MEMEST_CONVENTION_COUNT; conv++)
        CHECK(me_convention_covers((MemestConvention)conv, me_op_fake_scale.cls), "convention %d", conv);
    int n;
    const MeOpDesc *const *ops = me_op_list(&n);
    bool listed = false;
    for (int i = 0; i < n; i++) listed |= ops[i] == &me_op_fake_scale;
    CHECK(listed, "FakeScale not in me_op_list");
    CHECK(me_op_find("Conv", "", 17) != NULL, "the library's ops are still found");

    /* versions: the highest since not above the opset; none below the first */
    CHECK(!me_op_find("FakeVersioned", "", 4) && me_op_since("FakeVersioned", "") == 5, "FakeVersioned at opset 4");
    CHECK(me_op_find("FakeVersioned", "", 5) == &me_op_fake_v5, "FakeVersioned at opset 5");
    CHECK(me_op_find("FakeVersioned", "", 12) == &me_op_fake_v5, "FakeVersioned at opset 12");
    CHECK(me_op_find("FakeVersioned", "", 13) == &me_op_fake_v13, "FakeVersioned at opset 13");
    CHECK(me_op_find("FakeVersioned", "", 21) == &me_op_fake_v13, "FakeVersioned at opset 21");

    /* a descriptor missing a required entry fails naming the op */
    MeOpDesc broken = me_op_fake_scale;
    broken.name = "FakeBroken";
    broken.autograd = ME_AG_UNSET;
    CHECK(me_op_validate(&broken, why, sizeof(why)) < 0 && strstr(why, "FakeBroken") && strstr(why, "autograd"), "no rule: %s", why);
    broken.autograd = ME_AG_BY_ATTRS;
    CHECK(me_op_validate(&broken, why, sizeof(why)) < 0 && strstr(why, "FakeBroken") && strstr(why, "saved_rule"), "no hook: %s", why);
    broken.autograd = ME_AG_INPUT;
    broken.saved_rule = me_op_find("AdaptiveAvgPool", "", 17)->saved_rule;
    CHECK(me_op_validate(&broken, why, sizeof(why)) < 0 && strstr(why, "ignored"), "hook without BY_ATTRS: %s", why);
    broken = me_op_fake_scale;
    broken.autocast = ME_AC_UNSET;
    CHECK(me_op_validate(&broken, why, sizeof(why)) < 0 && strstr(why, "autocast"), "no autocast class: %s", why);
    broken = me_op_fake_scale;
    broken.autocast_cpu = ME_AC_UNSET;
    CHECK(me_op_validate(&broken, why, sizeof(why)) < 0 && strstr(why, "CPU autocast"), "no CPU autocast class: %s", why);
    broken = me_op_fake_scale;
    broken.infer = NULL;
    CHECK(me_op_validate(&broken, why, sizeof(why)) < 0 && strstr(why, "infer"), "no infer: %s", why);
}

static int value(MeGraph *g, const char *name, MeValueKind kind, int rank, const int64_t *d)
{
    int vi;
    me_graph_value(g, name, &vi);
    MeValue *v = &g->v[vi];
    v->kind = (uint8_t)kind;
    v->dtype = ME_DT_F32;
    v->known = kind != ME_V_ACT;
    v->shape.rank = rank;
    for (int i = 0; i < rank; i++) v->shape.d[i] = d[i];
    return vi;
}

/* x [2,4,8] → Mul(x, p) → a → FakeScale(a, w) → y: a needs a gradient (p
 * does), so FakeScale keeps it for backward, plus its extra tensor. */
static void test_in_model(void)
{
    MemestModel *m = me_calloc(1, sizeof(*m));
    MeGraph *g = &m->g;
    MeDiag d = { 0 };
    me_graph_init(g, "fake");
    g->opset = 17;
    int x = value(g, "x", ME_V_INPUT, 3, (int64_t[]){ 2, 4, 8 });
    int p = value(g, "p", ME_V_INIT, 1, (int64_t[]){ 1 });
    int w = value(g, "w", ME_V_INIT, 1, (int64_t[]){ 8 });
    int a = value(g, "a", ME_V_ACT, 0, NULL), y = value(g, "y", ME_V_ACT, 0, NULL);
    int mul, fake;
    me_graph_add_node(g, "Mul", "mul", 2, 1, &mul);
    g->n[mul].in[0] = x;
    g->n[mul].in[1] = p;
    g->n[mul].out[0] = a;
    me_graph_add_node(g, "FakeScale", "scale", 2, 1, &fake);
    g->n[fake].in[0] = a;
    g->n[fake].in[1] = w;
    g->n[fake].out[0] = y;
    me_graph_add_input(g, x);
    me_graph_add_output(g, y);
    int rc = me_graph_finalize(g, &d);
    if (rc >= 0) rc = me_infer_shapes(g, &d);
    CHECK(rc == 0, "shape inference: %s", d.msg);
    if (rc < 0) { memest_model_free(&m); return; }
    /* what the loader does after shape inference: the binding is valid and
     * the module scopes' holds are known */
    m->bound = true;
    CHECK((m->hold_end = me_malloc(sizeof(int) * (size_t)(g->nv + 1))) && me_scope_holds(g, m->hold_end, NULL) == 0, "scope holds");

    /* shape inference ran the descriptor's infer */
    const MeValue *yv = &g->v[y];
    CHECK(g->n[fake].desc == &me_op_fake_scale, "node bound to FakeScale");
    CHECK(yv->known && yv->shape.rank == 3 && yv->shape.d[0] == 2 && yv->shape.d[1] == 4 && yv->shape.d[2] == 8, "y's shape");
    CHECK(g->v[w].role == ME_R_PARAM, "w is a parameter (role 'w')");

    /* every convention: the default takes the op's cost hook; ptflops and
     * DeepSpeed count it as the descriptor says they see it (a patched
     * functional: |x| = 64); the others count it as zero, flagged */
    static const struct { MemestConvention conv; uint8_t status; uint64_t macs, flops; } want[] = {
        { MEMEST_CONVENTION_DEFAULT, ME_COST_OK, 64, 192 },
        { MEMEST_CONVENTION_TORCHSTAT, ME_COST_UNCOUNTED, 96, 32 }, /* per sample, columns swapped */
        { MEMEST_CONVENTION_FVCORE, ME_COST_UNCOUNTED, 64, 192 },
        { MEMEST_CONVENTION_PTFLOPS, ME_COST_OK, 64, 64 },
        { MEMEST_CONVENTION_THOP, ME_COST_UNCOUNTED, 64, 192 },
        { MEMEST_CONVENTION_DEEPSPEED, ME_COST_OK, 0, 64 },
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        MeCtx c = { .g = g, .d = &d, .n = &g->n[fake] };
        MeCost co;
        me_convention_cost(want[i].conv, &c, &co);
        CHECK(co.status == want[i].status && co.macs == want[i].macs && co.flops == want[i].flops,
              "%s: status %d, MACs %llu, FLOPs %llu", memest_convention_name(want[i].conv), co.status,
              (unsigned long long)co.macs, (unsigned long long)co.flops);
    }

    /* the training timeline: when FakeScale's backward runs, autograd still
     * holds what its forward saved: a (2·4·8 floats) and the extra tensor,
     * and nothing else (Mul kept only the input x) */
    for (int variant = 0; variant < 2; variant++) {
        MeOpDesc nosave = me_op_fake_scale;
        nosave.autograd = ME_AG_NONE;
        nosave.saved_extra = NULL;
        if (variant) g->n[fake].desc = &nosave;
        MemestMemorySettings s = { .mode = MEMEST_RUN_TRAIN, .optimizer = MEMEST_OPT_NONE, .record_series = 1 };
        char err[256] = "";
        MeMemResult r = { 0 };
        rc = me_memory_run(m, &s, &r, err, sizeof(err), true);
        CHECK(rc == 0 && r.n_mem == 1, "memory: %s", err);
        const MemestSeriesPoint *pts = r.series[0];
        int np = r.n_series[0];
        uint64_t saved = 0;
        int at_fake = 0;
        for (int i = 0; i < np; i++)
            if (pts[i].node == fake && pts[i].phase == MEMEST_PHASE_BACKWARD) {
                at_fake++;
                if (pts[i].live[MEMEST_MEM_SAVED] > saved) saved = pts[i].live[MEMEST_MEM_SAVED];
            }
        uint64_t expect = variant ? 0 : 2 * 4 * 8 * 4 + FAKE_EXTRA;
        CHECK(at_fake > 0 && saved == expect, "%s: saved bytes at FakeScale's backward %llu, want %llu (%d points)",
              variant ? "without a rule" : "FakeScale", (unsigned long long)saved, (unsigned long long)expect, at_fake);
        me_memory_result_free(&r);
        g->n[fake].desc = &me_op_fake_scale;
    }
    memest_model_free(&m);
}

int main(void)
{
    test_registered();
    test_in_model();
    printf("fake op: %d checks, %d failure(s)\n", checks, fails);
    return fails != 0;
}
