/* The registry: sorted (lookup is a binary search); every op × every
 * convention × its autograd rule, autocast class and flags stated (a
 * missing entry fails naming the op); versioned lookup by the model's
 * opset, and an op below its since an error; a few rules checked against
 * derivatives.yaml so that a wrong one fails too. */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "optim.h"
#include "ops/ops.h"

#include "../check.h"

static void test_every_op(void)
{
    int n;
    const MeOpDesc *const *ops = me_op_list(&n);
    CHECK(n > 100, "only %d ops listed", n);
    for (int i = 0; i < n; i++) {
        const MeOpDesc *o = ops[i];
        char why[256];
        CHECK(me_op_validate(o, why, sizeof(why)) == 0, "%s", why);
        if (!o->name) continue;
        for (int conv = 0; conv < MEMEST_CONVENTION_COUNT; conv++)
            CHECK(me_convention_covers((MemestConvention)conv, o->cls), "%s: convention %s has no entry for class %s", o->name,
                  memest_convention_name((MemestConvention)conv), (unsigned)o->cls < ME_C_COUNT ? me_cost_class_names[o->cls] : "?");
        CHECK(i == 0 || strcmp(ops[i - 1]->name, o->name) < 0 ||
                  (!strcmp(ops[i - 1]->name, o->name) && ops[i - 1]->since < o->since),
              "registry out of order at %s after %s", o->name, ops[i - 1]->name);
        /* the newest version of each op is what a recent model gets */
        if (i + 1 == n || strcmp(ops[i + 1]->name, o->name))
            CHECK(me_op_find(o->name, "", 23) == o, "%s (since %d) not found by lookup at opset 23", o->name, o->since);
    }
    for (int c = 0; c < ME_C_COUNT; c++) CHECK(me_cost_class_names[c] && me_cost_class_names[c][0], "class %d has no name", c);
    CHECK(!me_op_find("NoSuchOp", "", 17) && !me_op_since("NoSuchOp", ""), "unknown op found");
    CHECK(!me_op_find("Conv", "com.example", 17) && !me_op_since("Conv", "com.example"), "op of another domain found");
    CHECK(me_op_find("Conv", "ai.onnx", 17) != NULL, "ai.onnx is the default domain");
}

/* Clip takes min/max as attributes before opset 11, as inputs from 11 on. */
static void test_versions(void)
{
    const MeOpDesc *c1 = me_op_find("Clip", "", 1), *c10 = me_op_find("Clip", "", 10);
    const MeOpDesc *c11 = me_op_find("Clip", "", 11), *c17 = me_op_find("Clip", "", 17);
    CHECK(c1 && c1 == c10 && c1->since == 1 && c1->max_in == 1, "Clip at opsets 1 and 10: since %d", c10 ? c10->since : -1);
    CHECK(c11 && c11 == c17 && c11->since == 11 && c11->max_in == 3, "Clip at opsets 11 and 17: since %d", c17 ? c17->since : -1);
    CHECK(me_op_since("Clip", "") == 1, "Clip's first version");
    /* below every version's since: nothing, and me_op_since says why */
    CHECK(!me_op_find("GroupNormalization", "", 17) && me_op_since("GroupNormalization", "") == 18, "GroupNormalization at opset 17");
    CHECK(me_op_find("GroupNormalization", "", 18) != NULL, "GroupNormalization at opset 18");
    CHECK(!me_op_find("Reshape", "", 4) && me_op_find("Reshape", "", 5), "Reshape's shape input came in opset 5");
    /* the optimizer descriptors (src/optim.c): a row per enum value, in order */
    CHECK(me_optimizer_check() == 0, "src/optim.c's ME_OPTIMIZERS rows are not in MemestOptimizer order or lack a field");
    for (int o = 0; o < MEMEST_OPT_COUNT; o++)
        CHECK(memest_optimizer_from_name(memest_optimizer_name((MemestOptimizer)o)) == o, "optimizer %d's name", o);
}

/* A node below its op's since fails shape inference naming node, op and opset. */
static void test_below_since(void)
{
    MeGraph g;
    MeDiag d = { 0 };
    me_graph_init(&g, "old.onnx");
    g.opset = 4;
    int x, shape, y, ni;
    me_graph_value(&g, "x", &x);
    me_graph_value(&g, "shape", &shape);
    me_graph_value(&g, "y", &y);
    g.v[x].kind = ME_V_INPUT;
    g.v[x].dtype = ME_DT_F32;
    g.v[x].known = true;
    g.v[x].shape = (MeShape){ .rank = 2, .d = { 2, 3 } };
    g.v[shape].kind = ME_V_INIT;
    g.v[shape].dtype = ME_DT_I64;
    g.v[shape].known = true;
    g.v[shape].shape = (MeShape){ .rank = 1, .d = { 1 } };
    me_graph_add_node(&g, "Reshape", "flat", 2, 1, &ni);
    g.n[ni].in[0] = x;
    g.n[ni].in[1] = shape;
    g.n[ni].out[0] = y;
    me_graph_add_input(&g, x);
    me_graph_add_output(&g, y);
    int rc = me_graph_finalize(&g, &d);
    if (rc >= 0) rc = me_infer_shapes(&g, &d);
    CHECK(rc == ME_EINVAL && strstr(d.msg, "old.onnx") && strstr(d.msg, "'flat'") && strstr(d.msg, "(Reshape)") &&
              strstr(d.msg, "opset 5") && strstr(d.msg, "opset 4"),
          "Reshape at opset 4: rc %d, %s", rc, d.msg);
    me_graph_free(&g);
}

/* Rules as derivatives.yaml states them: a wrong entry fails here. */
static void test_rules(void)
{
    /* autocast: CUDA's list, then CPU's (torch 1.13's AutocastCPU kernels) */
    static const struct { const char *op; MeAutograd rule; MeAutocast ac, ac_cpu; } want[] = {
        { "Conv", ME_AG_OPERANDS, ME_AC_LOWER, ME_AC_LOWER },
        { "ConvTranspose", ME_AG_OPERANDS, ME_AC_LOWER, ME_AC_FP32 },
        { "MatMul", ME_AG_OPERANDS, ME_AC_LOWER, ME_AC_LOWER },
        { "Gemm", ME_AG_OPERANDS, ME_AC_LOWER, ME_AC_LOWER },
        { "Mul", ME_AG_OPERANDS, ME_AC_FOLLOW, ME_AC_FOLLOW },
        { "Div", ME_AG_DIV, ME_AC_FOLLOW, ME_AC_FOLLOW },
        { "Add", ME_AG_NONE, ME_AC_FOLLOW, ME_AC_FOLLOW },
        { "Relu", ME_AG_OUTPUT, ME_AC_FOLLOW, ME_AC_FOLLOW },
        { "LeakyRelu", ME_AG_INPUT, ME_AC_FOLLOW, ME_AC_FOLLOW },
        { "Sigmoid", ME_AG_OUTPUT, ME_AC_FOLLOW, ME_AC_FOLLOW },
        { "Gelu", ME_AG_INPUT, ME_AC_FOLLOW, ME_AC_FOLLOW },
        { "Softmax", ME_AG_OUTPUT, ME_AC_FP32, ME_AC_FOLLOW },
        { "Exp", ME_AG_OUTPUT, ME_AC_FP32, ME_AC_FOLLOW },
        { "Pow", ME_AG_INPUT, ME_AC_FP32, ME_AC_FOLLOW },
        { "ReduceSum", ME_AG_NONE, ME_AC_FP32, ME_AC_FOLLOW },
        { "ReduceProd", ME_AG_NONE, ME_AC_FP32, ME_AC_FP32 },
        { "MaxPool", ME_AG_INPUT, ME_AC_FOLLOW, ME_AC_FP32_3D },
        { "GlobalAveragePool", ME_AG_NONE, ME_AC_FOLLOW, ME_AC_FP32_3D },
        { "BatchNormalization", ME_AG_INPUT, ME_AC_INPUT, ME_AC_INPUT },
        { "LayerNormalization", ME_AG_INPUT, ME_AC_FP32, ME_AC_FOLLOW },
        { "Reshape", ME_AG_NONE, ME_AC_FOLLOW, ME_AC_FOLLOW },
        { "LSTM", ME_AG_OPERANDS, ME_AC_LOWER, ME_AC_FOLLOW },
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const MeOpDesc *d = me_op_find(want[i].op, "", 17);
        CHECK(d && d->autograd == want[i].rule, "%s: autograd rule %d, want %d", want[i].op, d ? (int)d->autograd : -1, (int)want[i].rule);
        CHECK(d && d->autocast == want[i].ac, "%s: autocast %d, want %d", want[i].op, d ? (int)d->autocast : -1, (int)want[i].ac);
        CHECK(d && d->autocast_cpu == want[i].ac_cpu, "%s: CPU autocast %d, want %d", want[i].op, d ? (int)d->autocast_cpu : -1, (int)want[i].ac_cpu);
    }
    /* views and gradient pass-through (memory.c reads these) */
    static const struct { const char *op; MeViewKind view; MeGradThrough gt; } views[] = {
        { "Reshape", ME_VIEW_RESHAPE, ME_GT_ALL }, { "Transpose", ME_VIEW_PERMUTE, ME_GT_ALL },
        { "Slice", ME_VIEW_SAME, ME_GT_NO },       { "Expand", ME_VIEW_EXPAND, ME_GT_NO },
        { "Unsqueeze", ME_VIEW_SQUEEZE, ME_GT_ALL }, { "Concat", ME_VIEW_NONE, ME_GT_ALL },
        { "Add", ME_VIEW_NONE, ME_GT_SAME_SIZE },  { "Sub", ME_VIEW_NONE, ME_GT_FIRST_SAME_SIZE },
        { "Mul", ME_VIEW_NONE, ME_GT_NO },
    };
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
        const MeOpDesc *d = me_op_find(views[i].op, "", 17);
        CHECK(d && d->view == views[i].view && d->grad_through == views[i].gt, "%s: view %d, gradient pass-through %d", views[i].op,
              d ? (int)d->view : -1, d ? (int)d->grad_through : -1);
    }
    /* adaptive pooling to 1x1 runs as mean() and keeps nothing */
    MeNode n = { .op = (char *)"AdaptiveAvgPool", .desc = me_op_find("AdaptiveAvgPool", "", 17) };
    int64_t ones[2] = { 1, 1 }, sevens[2] = { 7, 7 };
    MeAttr a = { .name = (char *)"output_size", .type = ME_A_INTS, .ints = ones, .n = 2 };
    n.attr = &a;
    n.n_attr = 1;
    CHECK(me_autograd_rule(&n, MEMEST_TORCH_1_13) == ME_AG_NONE, "AdaptiveAvgPool to 1x1 keeps nothing");
    a.ints = sevens;
    CHECK(me_autograd_rule(&n, MEMEST_TORCH_1_13) == ME_AG_INPUT, "AdaptiveAvgPool to 7x7 keeps its input");
    CHECK(me_autograd_rule(&n, MEMEST_TORCH_2) == ME_AG_INPUT, "AdaptiveAvgPool to 7x7 keeps its input in torch 2 too");
    /* mean over dims (MeanBackward1) keeps its input in 1.13, only its numel in 2.x */
    int64_t last[1] = { -1 };
    MeAttr ax = { .name = (char *)"axes", .type = ME_A_INTS, .ints = last, .n = 1 };
    MeNode mean = { .op = (char *)"ReduceMean", .desc = me_op_find("ReduceMean", "", 17), .attr = &ax, .n_attr = 1 };
    CHECK(me_autograd_rule(&mean, MEMEST_TORCH_1_13) == ME_AG_INPUT, "mean.dim keeps its input in torch 1.13");
    CHECK(me_autograd_rule(&mean, MEMEST_TORCH_2) == ME_AG_NONE, "mean.dim keeps sizes only in torch 2");
    mean.n_attr = 0;
    CHECK(me_autograd_rule(&mean, MEMEST_TORCH_1_13) == ME_AG_NONE, "mean over every element keeps sizes only");
    const MeOpDesc *c = me_op_find("Constant", "", 17);
    CHECK(c && (c->flags & ME_OPF_CONSTANT), "Constant is flagged");
}

/* Reports group nodes by op: a known op by its descriptor, an unknown one
 * by name and domain. */
static void test_same_op(void)
{
    const MeOpDesc *relu = me_op_find("Relu", "", 17), *tanh = me_op_find("Tanh", "", 17);
    MeNode a = { .op = "Relu", .domain = "", .desc = relu }, b = a, c = { .op = "Tanh", .domain = "", .desc = tanh };
    MeNode u1 = { .op = "Foo", .domain = "" }, u2 = u1, u3 = { .op = "Foo", .domain = "com.x" }, u4 = { .op = "Bar", .domain = "" };
    CHECK(relu && tanh && me_op_same(&a, &b) && !me_op_same(&a, &c), "known ops: same descriptor is the same op");
    CHECK(me_op_same(&u1, &u2), "unknown ops with one name and domain are the same op");
    CHECK(!me_op_same(&u1, &u3) && !me_op_same(&u1, &u4) && !me_op_same(&u1, &a), "unknown ops differ by domain and name");
}

int main(void)
{
    test_every_op();
    test_versions();
    test_below_since();
    test_rules();
    test_same_op();
    printf("registry: %d checks, %d failure(s)\n", checks, fails);
    return fails != 0;
}
