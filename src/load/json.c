/* JSON layer-graph loader (doc/json-format.md). Lowers PyTorch-style layers
 * (Conv2d, Linear, BatchNorm2d, ...) to the IR's ops and creates their
 * parameters as stored tensors named like PyTorch's state_dict
 * ("layer1.0.conv1.weight"). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "load/load.h"

typedef struct JCtx {
    MeGraph *g;
    MeDiag *d;
    const char *path;
    int li;              /* layer index, for messages */
    const char *lname;   /* layer name, for messages */
    const cJSON *layer;
    MeStrMap latest;     /* layer/input name → value index of its latest call */
    int prev;            /* value index of the previous layer's output */
    MeDType dtype;       /* dtype of parameters */
} JCtx;

static int jfail(JCtx *j, const char *key, const char *fmt, ...) ME_PRINTF(3, 4);
static int jfail(JCtx *j, const char *key, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (key)
        return me_error(j->d, ME_EINVAL, "%s: layers[%d] (\"%s\").%s: %s", j->path, j->li, j->lname, key, msg);
    return me_error(j->d, ME_EINVAL, "%s: layers[%d] (\"%s\"): %s", j->path, j->li, j->lname, msg);
}

static bool is_int(const cJSON *x)
{
    return cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble) && fabs(x->valuedouble) < 9.0e15;
}

static int get_int(JCtx *j, const char *key, int64_t def, bool required, int64_t lo, int64_t *out)
{
    *out = def;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j->layer, key);
    if (!x || cJSON_IsNull(x)) {
        if (required) return jfail(j, key, "is required");
        *out = def;
        return 0;
    }
    if (!is_int(x)) return jfail(j, key, "expected an integer");
    int64_t v = (int64_t)x->valuedouble;
    if (v < lo || v > ME_MAX_DIM) return jfail(j, key, "%lld is out of range", (long long)v);
    *out = v;
    return 0;
}

static int get_float(JCtx *j, const char *key, double def, double *out)
{
    *out = def;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j->layer, key);
    if (!x || cJSON_IsNull(x)) { *out = def; return 0; }
    if (!cJSON_IsNumber(x)) return jfail(j, key, "expected a number");
    *out = x->valuedouble;
    return 0;
}

static int get_bool(JCtx *j, const char *key, bool def, bool *out)
{
    *out = def;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j->layer, key);
    if (!x || cJSON_IsNull(x)) { *out = def; return 0; }
    if (!cJSON_IsBool(x)) return jfail(j, key, "expected true or false");
    *out = cJSON_IsTrue(x);
    return 0;
}

/* An int or an [h, w] pair (PyTorch's _pair). */
static int get_pair(JCtx *j, const char *key, int64_t def, bool required, int64_t lo, int64_t out[2])
{
    out[0] = out[1] = def;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j->layer, key);
    if (!x || cJSON_IsNull(x)) {
        if (required) return jfail(j, key, "is required");
        out[0] = out[1] = def;
        return 0;
    }
    if (is_int(x)) {
        out[0] = out[1] = (int64_t)x->valuedouble;
    } else if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 2 && is_int(x->child) && is_int(x->child->next)) {
        out[0] = (int64_t)x->child->valuedouble;
        out[1] = (int64_t)x->child->next->valuedouble;
    } else {
        return jfail(j, key, "expected an integer or [h, w]");
    }
    for (int i = 0; i < 2; i++)
        if (out[i] < lo || out[i] > ME_MAX_DIM) return jfail(j, key, "%lld is out of range", (long long)out[i]);
    return 0;
}

/* A stored tensor "<layer>.<suffix>" of the given shape; its data is never
 * needed. A non-trainable one (affine=false) is an analysis-time constant. */
static int add_tensor(JCtx *j, const char *suffix, int rank, const int64_t *dims, bool stored, int *vi)
{
    char name[ME_MAX_NAME + 64]; /* layer names are capped, suffixes short */
    snprintf(name, sizeof(name), "%s.%s", j->lname, suffix);
    int rc = me_graph_new_value(j->g, name, vi);
    if (rc < 0) return rc;
    MeValue *v = &j->g->v[*vi];
    v->kind = stored ? ME_V_INIT : ME_V_CONST;
    v->dtype = j->dtype;
    v->known = true;
    v->shape.rank = rank;
    for (int i = 0; i < rank; i++) v->shape.d[i] = dims[i];
    return 0;
}

static int add_scalar(JCtx *j, const char *suffix, double val, int *vi)
{
    int rc = add_tensor(j, suffix, 0, NULL, false, vi);
    if (rc < 0) return rc;
    return me_value_set_floats(&j->g->v[*vi], &val, 1);
}

static int attr_int(MeNode *n, const char *name, int64_t v)
{
    MeAttr *a = me_node_add_attr(n, name, ME_A_INT);
    if (!a) return ME_ENOMEM;
    a->i = v;
    return 0;
}

static int attr_float(MeNode *n, const char *name, double v)
{
    MeAttr *a = me_node_add_attr(n, name, ME_A_FLOAT);
    if (!a) return ME_ENOMEM;
    a->f = v;
    return 0;
}

static int attr_ints(MeNode *n, const char *name, const int64_t *v, int cnt)
{
    MeAttr *a = me_node_add_attr(n, name, ME_A_INTS);
    if (!a) return ME_ENOMEM;
    a->ints = me_malloc(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
    if (!a->ints) return ME_ENOMEM;
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)cnt);
    a->n = cnt;
    return 0;
}

static int attr_str(MeNode *n, const char *name, const char *s)
{
    MeAttr *a = me_node_add_attr(n, name, ME_A_STRING);
    if (!a || !(a->s = me_strdup(s))) return ME_ENOMEM;
    return 0;
}

/* Resolves the layer's "inputs" (default: previous layer) into value indices. */
static int layer_inputs(JCtx *j, int *ins, int max, int *n)
{
    *n = 0;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j->layer, "inputs");
    if (!x) {
        if (j->prev < 0) return jfail(j, "inputs", "there is no previous layer or graph input to read");
        ins[0] = j->prev;
        *n = 1;
        return 0;
    }
    if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) < 1) return jfail(j, "inputs", "expected a non-empty list of names");
    int k = 0;
    for (const cJSON *e = x->child; e; e = e->next, k++) {
        if (k >= max) return jfail(j, "inputs", "more than %d inputs", max);
        if (!cJSON_IsString(e)) return jfail(j, "inputs", "entry %d is not a string", k);
        int vi = me_strmap_get(&j->latest, e->valuestring);
        if (vi < 0) return jfail(j, "inputs", "'%s' is not a graph input or an earlier layer", e->valuestring);
        ins[k] = vi;
    }
    *n = k;
    return 0;
}

typedef int (*LowerFn)(JCtx *j, MeNode *n);

/* --- per-type lowering: sets op-specific inputs (after the data inputs),
 *     attributes and stored tensors. n->in[0..] already hold data inputs. --- */

static int append_input(JCtx *j, MeNode *n, int vi)
{
    /* edge lists live in the graph's arena: a longer copy replaces the old one */
    int *a = me_arena_alloc(&j->g->arena, sizeof(int) * (size_t)(n->n_in + 1 + n->n_out));
    if (!a) return ME_ENOMEM;
    memcpy(a, n->in, sizeof(int) * (size_t)n->n_in);
    a[n->n_in] = vi;
    memcpy(a + n->n_in + 1, n->out, sizeof(int) * (size_t)n->n_out);
    n->in = a;
    n->out = a + n->n_in + 1;
    n->n_in++;
    return 0;
}

static int lower_conv(JCtx *j, MeNode *n, bool transpose)
{
    int64_t cin, cout, groups, k[2], s[2], p[2], dil[2], op[2] = { 0, 0 };
    bool bias;
    int rc;
    if ((rc = get_int(j, "in_channels", 0, true, 1, &cin)) < 0 || (rc = get_int(j, "out_channels", 0, true, 1, &cout)) < 0 ||
        (rc = get_int(j, "groups", 1, false, 1, &groups)) < 0 || (rc = get_pair(j, "kernel_size", 0, true, 1, k)) < 0 ||
        (rc = get_pair(j, "stride", 1, false, 1, s)) < 0 || (rc = get_pair(j, "dilation", 1, false, 1, dil)) < 0 ||
        (rc = get_bool(j, "bias", true, &bias)) < 0)
        return rc;
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(j->layer, "padding");
    if (cJSON_IsString(pad)) {
        if (!strcmp(pad->valuestring, "same") && !transpose) rc = attr_str(n, "auto_pad", "SAME_UPPER");
        else if (!strcmp(pad->valuestring, "valid")) rc = attr_str(n, "auto_pad", "VALID");
        else return jfail(j, "padding", "expected an integer, [h, w], \"same\" or \"valid\"");
        if (rc < 0) return rc;
        p[0] = p[1] = 0;
    } else if ((rc = get_pair(j, "padding", 0, false, 0, p)) < 0) {
        return rc;
    }
    if (transpose && (rc = get_pair(j, "output_padding", 0, false, 0, op)) < 0) return rc;
    if (cin % groups || cout % groups) return jfail(j, "groups", "%lld does not divide in_channels %lld and out_channels %lld", (long long)groups, (long long)cin, (long long)cout);
    int64_t wd[4] = { transpose ? cin : cout, transpose ? cout / groups : cin / groups, k[0], k[1] };
    int wi, bi;
    if ((rc = add_tensor(j, "weight", 4, wd, true, &wi)) < 0 || (rc = append_input(j, n, wi)) < 0) return rc;
    if (bias && ((rc = add_tensor(j, "bias", 1, &cout, true, &bi)) < 0 || (rc = append_input(j, n, bi)) < 0)) return rc;
    int64_t pads[4] = { p[0], p[1], p[0], p[1] };
    if ((rc = attr_ints(n, "kernel_shape", k, 2)) < 0 || (rc = attr_ints(n, "strides", s, 2)) < 0 ||
        (rc = attr_ints(n, "dilations", dil, 2)) < 0 || (rc = attr_ints(n, "pads", pads, 4)) < 0 ||
        (rc = attr_int(n, "group", groups)) < 0)
        return rc;
    if (transpose && (rc = attr_ints(n, "output_padding", op, 2)) < 0) return rc;
    return 0;
}

static int lower_conv2d(JCtx *j, MeNode *n) { return lower_conv(j, n, false); }
static int lower_convt2d(JCtx *j, MeNode *n) { return lower_conv(j, n, true); }

static int lower_linear(JCtx *j, MeNode *n)
{
    int64_t fin, fout;
    bool bias;
    int rc, wi, bi;
    if ((rc = get_int(j, "in_features", 0, true, 1, &fin)) < 0 || (rc = get_int(j, "out_features", 0, true, 1, &fout)) < 0 ||
        (rc = get_bool(j, "bias", true, &bias)) < 0)
        return rc;
    int64_t wd[2] = { fout, fin };
    if ((rc = add_tensor(j, "weight", 2, wd, true, &wi)) < 0 || (rc = append_input(j, n, wi)) < 0) return rc;
    if (bias && ((rc = add_tensor(j, "bias", 1, &fout, true, &bi)) < 0 || (rc = append_input(j, n, bi)) < 0)) return rc;
    return 0;
}

static int lower_bn(JCtx *j, MeNode *n)
{
    int64_t c;
    bool affine;
    double eps;
    int rc, vi;
    if ((rc = get_int(j, "num_features", 0, true, 1, &c)) < 0 || (rc = get_bool(j, "affine", true, &affine)) < 0 ||
        (rc = get_float(j, "eps", 1e-5, &eps)) < 0)
        return rc;
    static const char *const names[4] = { "weight", "bias", "running_mean", "running_var" };
    for (int i = 0; i < 4; i++) {
        bool stored = i >= 2 || affine;
        if ((rc = add_tensor(j, names[i], 1, &c, stored, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
    }
    return attr_float(n, "epsilon", eps);
}

static int lower_layernorm(JCtx *j, MeNode *n)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j->layer, "normalized_shape");
    int64_t dims[ME_MAX_RANK];
    int nd = 0;
    if (is_int(x)) dims[nd++] = (int64_t)x->valuedouble;
    else if (cJSON_IsArray(x)) {
        for (const cJSON *e = x->child; e; e = e->next) {
            if (nd >= ME_MAX_RANK || !is_int(e)) return jfail(j, "normalized_shape", "expected an integer or a list of integers");
            dims[nd++] = (int64_t)e->valuedouble;
        }
    }
    if (nd < 1) return jfail(j, "normalized_shape", "is required (an integer or a list)");
    for (int i = 0; i < nd; i++)
        if (dims[i] < 1 || dims[i] > ME_MAX_DIM) return jfail(j, "normalized_shape", "%lld is out of range", (long long)dims[i]);
    bool affine;
    double eps;
    int rc, vi;
    if ((rc = get_bool(j, "elementwise_affine", true, &affine)) < 0 || (rc = get_float(j, "eps", 1e-5, &eps)) < 0) return rc;
    if ((rc = add_tensor(j, "weight", nd, dims, affine, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
    if ((rc = add_tensor(j, "bias", nd, dims, affine, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
    if ((rc = attr_int(n, "axis", -nd)) < 0) return rc;
    return attr_float(n, "epsilon", eps);
}

static int lower_inplace(JCtx *j, MeNode *n)
{
    bool inplace = false;
    int rc = get_bool(j, "inplace", false, &inplace);
    if (inplace) n->flags |= ME_N_INPLACE;
    return rc;
}

static int lower_relu6(JCtx *j, MeNode *n)
{
    int rc = lower_inplace(j, n);
    if (rc >= 0) rc = attr_float(n, "min", 0);
    if (rc >= 0) rc = attr_float(n, "max", 6);
    return rc;
}

static int lower_leaky(JCtx *j, MeNode *n)
{
    double slope = 0.01;
    int rc = lower_inplace(j, n);
    if (rc >= 0) rc = get_float(j, "negative_slope", 0.01, &slope);
    if (rc >= 0) rc = attr_float(n, "alpha", slope);
    return rc;
}

static int lower_none(JCtx *j, MeNode *n) { (void)j; (void)n; return 0; }

static int lower_pool(JCtx *j, MeNode *n, bool avg)
{
    int64_t k[2], s[2], p[2] = { 0, 0 }, dil[2];
    bool ceil_mode = false, cip = true;
    int rc;
    if ((rc = get_pair(j, "kernel_size", 0, true, 1, k)) < 0 || (rc = get_pair(j, "padding", 0, false, 0, p)) < 0 ||
        (rc = get_pair(j, "dilation", 1, false, 1, dil)) < 0 || (rc = get_bool(j, "ceil_mode", false, &ceil_mode)) < 0 ||
        (rc = get_bool(j, "count_include_pad", true, &cip)) < 0)
        return rc;
    const cJSON *sx = cJSON_GetObjectItemCaseSensitive(j->layer, "stride");
    if (!sx || cJSON_IsNull(sx) || (cJSON_IsArray(sx) && !cJSON_GetArraySize(sx))) { s[0] = k[0]; s[1] = k[1]; }
    else if ((rc = get_pair(j, "stride", 1, false, 1, s)) < 0) return rc;
    int64_t pads[4] = { p[0], p[1], p[0], p[1] };
    if ((rc = attr_ints(n, "kernel_shape", k, 2)) < 0 || (rc = attr_ints(n, "strides", s, 2)) < 0 ||
        (rc = attr_ints(n, "pads", pads, 4)) < 0 || (rc = attr_int(n, "ceil_mode", ceil_mode)) < 0)
        return rc;
    if (avg) return attr_int(n, "count_include_pad", cip);
    return attr_ints(n, "dilations", dil, 2);
}

static int lower_maxpool(JCtx *j, MeNode *n) { return lower_pool(j, n, false); }
static int lower_avgpool(JCtx *j, MeNode *n) { return lower_pool(j, n, true); }

static int lower_adaptive(JCtx *j, MeNode *n)
{
    int64_t os[2];
    int rc = get_pair(j, "output_size", 0, true, 1, os);
    return rc < 0 ? rc : attr_ints(n, "output_size", os, 2);
}

static int lower_dropout(JCtx *j, MeNode *n)
{
    double p = 0.5;
    int rc = lower_inplace(j, n);
    if (rc >= 0) rc = get_float(j, "p", 0.5, &p);
    if (rc >= 0 && (p < 0 || p > 1)) return jfail(j, "p", "must be in [0, 1]");
    return rc < 0 ? rc : attr_float(n, "ratio", p);
}

static int lower_flatten(JCtx *j, MeNode *n)
{
    int64_t sd, ed;
    int rc;
    if ((rc = get_int(j, "start_dim", 1, false, -ME_MAX_RANK, &sd)) < 0 || (rc = get_int(j, "end_dim", -1, false, -ME_MAX_RANK, &ed)) < 0)
        return rc;
    /* ONNX Flatten keeps [prod(:axis), prod(axis:)], which is torch.flatten
     * only for start_dim 1 to the end. */
    if (sd != 1 || ed != -1) return jfail(j, "start_dim", "only start_dim=1, end_dim=-1 is supported");
    return attr_int(n, "axis", 1);
}

static int lower_axis(JCtx *j, MeNode *n, const char *key, int64_t def)
{
    int64_t dim;
    int rc = get_int(j, key, def, false, -ME_MAX_RANK, &dim);
    return rc < 0 ? rc : attr_int(n, "axis", dim);
}

static int lower_softmax(JCtx *j, MeNode *n) { return lower_axis(j, n, "dim", -1); }
static int lower_concat(JCtx *j, MeNode *n) { return lower_axis(j, n, "dim", 1); }

static int lower_scale(JCtx *j, MeNode *n)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j->layer, "factor");
    if (!cJSON_IsNumber(x)) return jfail(j, "factor", "expected a number");
    int vi, rc = add_scalar(j, "factor", x->valuedouble, &vi);
    return rc < 0 ? rc : append_input(j, n, vi);
}

/* nn.Embedding → Gather(weight, indices) */
static int lower_embedding(JCtx *j, MeNode *n)
{
    int64_t num, dim;
    int rc, wi;
    if ((rc = get_int(j, "num_embeddings", 0, true, 1, &num)) < 0 || (rc = get_int(j, "embedding_dim", 0, true, 1, &dim)) < 0) return rc;
    int64_t wd[2] = { num, dim };
    if ((rc = add_tensor(j, "weight", 2, wd, true, &wi)) < 0 || (rc = append_input(j, n, n->in[0])) < 0) return rc;
    n->in[0] = wi; /* Gather reads the table first, the indices second */
    return attr_int(n, "axis", 0);
}

/* nn.MultiheadAttention: inputs query[, key, value]; self-attention when
 * only the query is given. */
static int lower_mha(JCtx *j, MeNode *n)
{
    int64_t e, heads;
    bool bias, bf;
    int rc, vi;
    if ((rc = get_int(j, "embed_dim", 0, true, 1, &e)) < 0 || (rc = get_int(j, "num_heads", 0, true, 1, &heads)) < 0 ||
        (rc = get_bool(j, "bias", true, &bias)) < 0 || (rc = get_bool(j, "batch_first", false, &bf)) < 0)
        return rc;
    if (n->n_in == 2) return jfail(j, "inputs", "give the query alone (self-attention) or query, key and value");
    while (n->n_in < 3)
        if ((rc = append_input(j, n, n->in[0])) < 0) return rc;
    int64_t in_w[2] = { 3 * e, e }, out_w[2] = { e, e }, in_b = 3 * e;
    if ((rc = add_tensor(j, "in_proj_weight", 2, in_w, true, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
    if ((rc = add_tensor(j, "out_proj.weight", 2, out_w, true, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
    if (bias) {
        if ((rc = add_tensor(j, "in_proj_bias", 1, &in_b, true, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
        if ((rc = add_tensor(j, "out_proj.bias", 1, &e, true, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
    }
    if ((rc = attr_int(n, "embed_dim", e)) < 0 || (rc = attr_int(n, "num_heads", heads)) < 0) return rc;
    return attr_int(n, "batch_first", bf);
}

/* nn.LSTM / nn.GRU / nn.RNN → TorchRNN with PyTorch's parameter names. */
static int lower_rnn(JCtx *j, MeNode *n)
{
    int64_t in, h, layers;
    bool bias, bf, bidir;
    int rc, vi;
    if ((rc = get_int(j, "input_size", 0, true, 1, &in)) < 0 || (rc = get_int(j, "hidden_size", 0, true, 1, &h)) < 0 ||
        (rc = get_int(j, "num_layers", 1, false, 1, &layers)) < 0 || (rc = get_bool(j, "bias", true, &bias)) < 0 ||
        (rc = get_bool(j, "batch_first", false, &bf)) < 0 || (rc = get_bool(j, "bidirectional", false, &bidir)) < 0)
        return rc;
    if (layers > 1024) return jfail(j, "num_layers", "%lld layers is not plausible", (long long)layers);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j->layer, "type");
    const char *mode = !strcmp(t->valuestring, "LSTM") ? "LSTM" : !strcmp(t->valuestring, "GRU") ? "GRU" : "RNN";
    int64_t g = !strcmp(mode, "LSTM") ? 4 : !strcmp(mode, "GRU") ? 3 : 1, dirs = bidir ? 2 : 1;
    for (int64_t l = 0; l < layers; l++) {
        for (int64_t d = 0; d < dirs; d++) {
            char name[64];
            const char *sfx = d ? "_reverse" : "";
            int64_t wih[2] = { g * h, l ? dirs * h : in }, whh[2] = { g * h, h }, b = g * h;
            snprintf(name, sizeof(name), "weight_ih_l%lld%s", (long long)l, sfx);
            if ((rc = add_tensor(j, name, 2, wih, true, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
            snprintf(name, sizeof(name), "weight_hh_l%lld%s", (long long)l, sfx);
            if ((rc = add_tensor(j, name, 2, whh, true, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
            if (!bias) continue;
            snprintf(name, sizeof(name), "bias_ih_l%lld%s", (long long)l, sfx);
            if ((rc = add_tensor(j, name, 1, &b, true, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
            snprintf(name, sizeof(name), "bias_hh_l%lld%s", (long long)l, sfx);
            if ((rc = add_tensor(j, name, 1, &b, true, &vi)) < 0 || (rc = append_input(j, n, vi)) < 0) return rc;
        }
    }
    MeAttr *a = me_node_add_attr(n, "mode", ME_A_STRING);
    if (!a || !(a->s = me_strdup(mode))) return ME_ENOMEM;
    if ((rc = attr_int(n, "input_size", in)) < 0 || (rc = attr_int(n, "hidden_size", h)) < 0 ||
        (rc = attr_int(n, "num_layers", layers)) < 0 || (rc = attr_int(n, "bidirectional", bidir)) < 0)
        return rc;
    return attr_int(n, "batch_first", bf);
}

/* nn.Upsample(scale_factor, mode) on an NCHW input → Resize(x, -, scales) */
static int lower_upsample(JCtx *j, MeNode *n)
{
    double f;
    int rc, vi;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j->layer, "mode");
    if ((rc = get_float(j, "scale_factor", 0, &f)) < 0) return rc;
    if (!(f > 0) || f > 1e6) return jfail(j, "scale_factor", "must be a positive number");
    if (m && !cJSON_IsString(m)) return jfail(j, "mode", "expected a string");
    const char *mode = m ? m->valuestring : "nearest";
    const char *onnx_mode = !strcmp(mode, "nearest") ? "nearest" : !strcmp(mode, "bicubic") ? "cubic" : "linear";
    int64_t four = 4;
    if ((rc = add_tensor(j, "scales", 1, &four, false, &vi)) < 0) return rc;
    double sc[4] = { 1, 1, f, f };
    if ((rc = me_value_set_floats(&j->g->v[vi], sc, 4)) < 0 || (rc = append_input(j, n, -1)) < 0 || (rc = append_input(j, n, vi)) < 0)
        return rc;
    return attr_str(n, "mode", onnx_mode);
}

/* torch.mean(x) over every element → a scalar */
static int lower_mean(JCtx *j, MeNode *n)
{
    (void)j;
    return attr_int(n, "keepdims", 0);
}

typedef struct LayerType {
    const char *type;  /* PyTorch class name */
    const char *op;    /* IR op */
    uint8_t min_in, max_in;
    bool functional;   /* default of the "functional" flag */
    LowerFn lower;
} LayerType;

static const LayerType layer_types[] = {
    { "Conv2d", "Conv", 1, 1, false, lower_conv2d },
    { "ConvTranspose2d", "ConvTranspose", 1, 1, false, lower_convt2d },
    { "Linear", "Linear", 1, 1, false, lower_linear },
    { "BatchNorm2d", "BatchNormalization", 1, 1, false, lower_bn },
    { "BatchNorm1d", "BatchNormalization", 1, 1, false, lower_bn },
    { "LayerNorm", "LayerNormalization", 1, 1, false, lower_layernorm },
    { "ReLU", "Relu", 1, 1, false, lower_inplace },
    { "ReLU6", "Clip", 1, 1, false, lower_relu6 },
    { "LeakyReLU", "LeakyRelu", 1, 1, false, lower_leaky },
    { "SiLU", "SiLU", 1, 1, false, lower_inplace },
    { "Hardswish", "HardSwish", 1, 1, false, lower_inplace },
    { "Hardsigmoid", "HardSigmoid", 1, 1, false, lower_inplace },
    { "GELU", "Gelu", 1, 1, false, lower_none },
    { "Sigmoid", "Sigmoid", 1, 1, false, lower_none },
    { "Tanh", "Tanh", 1, 1, false, lower_none },
    { "Identity", "Identity", 1, 1, false, lower_none },
    { "MaxPool2d", "MaxPool", 1, 1, false, lower_maxpool },
    { "AvgPool2d", "AveragePool", 1, 1, false, lower_avgpool },
    { "AdaptiveAvgPool2d", "AdaptiveAvgPool", 1, 1, false, lower_adaptive },
    { "Dropout", "Dropout", 1, 1, false, lower_dropout },
    { "Flatten", "Flatten", 1, 1, false, lower_flatten },
    { "Softmax", "Softmax", 1, 1, false, lower_softmax },
    { "LogSoftmax", "LogSoftmax", 1, 1, false, lower_softmax },
    { "Add", "Add", 2, 2, true, lower_none },
    { "Sub", "Sub", 2, 2, true, lower_none },
    { "Mul", "Mul", 2, 2, true, lower_none },
    { "Div", "Div", 2, 2, true, lower_none },
    { "Scale", "Mul", 1, 1, true, lower_scale },
    { "Concat", "Concat", 1, 64, true, lower_concat },
    { "Embedding", "Gather", 1, 1, false, lower_embedding },
    { "MultiheadAttention", "MultiheadAttention", 1, 3, false, lower_mha },
    { "LSTM", "TorchRNN", 1, 1, false, lower_rnn },
    { "GRU", "TorchRNN", 1, 1, false, lower_rnn },
    { "RNN", "TorchRNN", 1, 1, false, lower_rnn },
    { "Upsample", "Resize", 1, 1, false, lower_upsample },
    { "Mean", "ReduceMean", 1, 1, true, lower_mean },
};

static int load_inputs(JCtx *j, const cJSON *root)
{
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    if (!cJSON_IsArray(ins) || !cJSON_GetArraySize(ins))
        return me_error(j->d, ME_EINVAL, "%s: inputs: expected a non-empty list", j->path);
    int k = 0;
    for (const cJSON *e = ins->child; e; e = e->next, k++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        if (!cJSON_IsString(name) || !*name->valuestring)
            return me_error(j->d, ME_EINVAL, "%s: inputs[%d].name: expected a non-empty string", j->path, k);
        if (!me_utf8_valid(name->valuestring))
            return me_error(j->d, ME_EINVAL, "%s: inputs[%d].name: not valid UTF-8", j->path, k);
        if (strlen(name->valuestring) > ME_MAX_NAME)
            return me_error(j->d, ME_EINVAL, "%s: inputs[%d].name: longer than %d bytes", j->path, k, ME_MAX_NAME);
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) >= ME_MAX_RANK)
            return me_error(j->d, ME_EINVAL, "%s: inputs[%d].shape: expected a list of at most %d sizes (one sample, no batch)", j->path, k, ME_MAX_RANK - 1);
        int dtype = ME_DT_F32;
        if (dt && (!cJSON_IsString(dt) || (dtype = me_dtype_from_name(dt->valuestring)) < 0))
            return me_error(j->d, ME_EINVAL, "%s: inputs[%d].dtype: unknown type", j->path, k);
        if (me_graph_find(j->g, name->valuestring) >= 0)
            return me_error(j->d, ME_EINVAL, "%s: inputs[%d].name: '%s' is used twice", j->path, k, name->valuestring);
        int vi, rc = me_graph_value(j->g, name->valuestring, &vi);
        if (rc < 0) return rc;
        MeValue *v = &j->g->v[vi];
        v->kind = ME_V_INPUT;
        v->dtype = (MeDType)dtype;
        v->dtype_declared = dt != NULL;
        v->shape.rank = 1 + cJSON_GetArraySize(shape);
        v->sym = me_calloc(ME_MAX_RANK, sizeof(char *));
        if (!v->sym || !(v->sym[0] = me_strdup("batch"))) return ME_ENOMEM;
        v->shape.d[0] = -1; /* the batch, bound later */
        v->dims_default = true;
        int i = 1;
        for (const cJSON *s = shape->child; s; s = s->next, i++) {
            if (!is_int(s) || s->valuedouble < 0 || s->valuedouble > (double)ME_MAX_DIM)
                return me_error(j->d, ME_EINVAL, "%s: inputs[%d].shape[%d]: expected a size between 0 and 2^40", j->path, k, i - 1);
            v->shape.d[i] = (int64_t)s->valuedouble;
        }
        const cJSON *rg = cJSON_GetObjectItemCaseSensitive(e, "requires_grad");
        if (rg && !cJSON_IsBool(rg)) return me_error(j->d, ME_EINVAL, "%s: inputs[%d].requires_grad: expected true or false", j->path, k);
        v->requires_grad = rg && cJSON_IsTrue(rg);
        if ((rc = me_graph_add_input(j->g, vi)) < 0) return rc;
        if ((rc = me_strmap_put(&j->latest, v->name, vi)) < 0) return rc;
        if (k == 0) j->prev = vi;
    }
    return 0;
}

static int load_layer(JCtx *j, const cJSON *layer)
{
    j->layer = layer;
    j->lname = "?";
    if (!cJSON_IsObject(layer)) return me_error(j->d, ME_EINVAL, "%s: layers[%d]: expected an object", j->path, j->li);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(layer, "name");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(layer, "type");
    if (!cJSON_IsString(name) || !*name->valuestring)
        return me_error(j->d, ME_EINVAL, "%s: layers[%d].name: expected a non-empty string", j->path, j->li);
    if (!me_utf8_valid(name->valuestring))
        return me_error(j->d, ME_EINVAL, "%s: layers[%d].name: not valid UTF-8", j->path, j->li);
    if (strlen(name->valuestring) > ME_MAX_NAME)
        return me_error(j->d, ME_EINVAL, "%s: layers[%d].name: longer than %d bytes", j->path, j->li, ME_MAX_NAME);
    j->lname = name->valuestring;
    if (!cJSON_IsString(type)) return jfail(j, "type", "expected a string");
    const LayerType *lt = NULL;
    for (size_t i = 0; i < sizeof(layer_types) / sizeof(layer_types[0]); i++)
        if (!strcmp(layer_types[i].type, type->valuestring)) lt = &layer_types[i];
    if (!lt) return jfail(j, "type", "unknown layer type '%s' (doc/json-format.md lists the known ones)", type->valuestring);

    int ins[64], n_in, rc;
    if ((rc = layer_inputs(j, ins, 64, &n_in)) < 0) return rc;
    if (n_in < lt->min_in || n_in > lt->max_in)
        return jfail(j, "inputs", "%s takes %d..%d inputs, got %d", lt->type, lt->min_in, lt->max_in, n_in);
    int ni;
    if ((rc = me_graph_add_node(j->g, lt->op, j->lname, n_in, 1, &ni)) < 0) return rc;
    MeNode *n = &j->g->n[ni];
    memcpy(n->in, ins, sizeof(int) * (size_t)n_in);
    if (!(n->module = me_graph_strdup(j->g, j->lname))) return ME_ENOMEM;
    bool functional, frozen, ckpt;
    if ((rc = get_bool(j, "functional", lt->functional, &functional)) < 0 || (rc = get_bool(j, "frozen", false, &frozen)) < 0 ||
        (rc = get_bool(j, "checkpoint", false, &ckpt)) < 0)
        return rc;
    n->flags |= (functional ? ME_N_FUNCTIONAL : 0) | (frozen ? ME_N_FROZEN : 0) | (ckpt ? ME_N_CHECKPOINT : 0);
    if ((rc = lt->lower(j, n)) < 0) return rc;
    int out;
    if ((rc = me_graph_new_value(j->g, j->lname, &out)) < 0) return rc;
    j->g->n[ni].out[0] = out;
    j->prev = out;
    return me_strmap_put(&j->latest, j->g->v[out].name, out) < 0 ? ME_ENOMEM
         : me_strmap_put(&j->latest, j->g->n[ni].module, out);
}

static int load_outputs(JCtx *j, const cJSON *root)
{
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(root, "outputs");
    int n = outs ? cJSON_GetArraySize(outs) : 1;
    if (outs && (!cJSON_IsArray(outs) || n < 1)) return me_error(j->d, ME_EINVAL, "%s: outputs: expected a non-empty list of names", j->path);
    if (!outs) return me_graph_add_output(j->g, j->prev);
    int k = 0;
    for (const cJSON *e = outs->child; e; e = e->next, k++) {
        int vi = cJSON_IsString(e) ? me_strmap_get(&j->latest, e->valuestring) : -1;
        if (vi < 0) return me_error(j->d, ME_EINVAL, "%s: outputs[%d]: not the name of a layer or input", j->path, k);
        int rc = me_graph_add_output(j->g, vi);
        if (rc < 0) return rc;
    }
    return 0;
}

/* file is opened, path named in messages */
static int read_file(const char *file, const char *path, char **buf, size_t *len, MeDiag *d)
{
    int fd = me_open_regular(file, path, d);
    if (fd < 0) return fd;
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return me_error(d, ME_EIO, "%s: cannot open: %s", path, strerror(errno)); }
    char *b = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            if (cap > ((size_t)256 << 20)) { rc = me_error(d, ME_EINVAL, "%s: a JSON model larger than 256 MiB is not plausible", path); break; }
            cap = cap ? cap * 2 : 65536 * 2;
            char *nb = me_realloc(b, cap);
            if (!nb) { rc = ME_ENOMEM; break; }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) rc = me_error(d, ME_EIO, "%s: read error: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (rc < 0) { me_free(b); return rc; }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

int me_load_json(MeGraph *g, const MeSource *src, MeDiag *d)
{
    const char *path = g->path;
    char *buf = NULL;
    const char *text = src->data;
    size_t len = src->len;
    int rc = 0;
    if (!text) {
        if ((rc = read_file(src->path, path, &buf, &len, d)) < 0) return rc;
        text = buf;
    } else if (len > ((size_t)256 << 20)) {
        return me_error(d, ME_EINVAL, "%s: a JSON model larger than 256 MiB is not plausible", path);
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    JCtx j = { .g = g, .d = d, .path = path, .prev = -1, .dtype = ME_DT_F32 };
    if (!root) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        int line = 1, col = 1;
        for (size_t i = 0; i < off && i < len; i++) {
            if (text[i] == '\n') { line++; col = 1; } else col++;
        }
        rc = me_error(d, ME_EINVAL, "%s:%d:%d: invalid JSON (cJSON stopped here)", path, line, col);
        goto end;
    }
    me_free(buf); /* the tree holds copies of its strings */
    buf = NULL;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "memest-graph")) {
        rc = me_error(d, ME_EINVAL, "%s: format: expected \"memest-graph\" (see doc/json-format.md)", path);
        goto end;
    }
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
        rc = me_error(d, ME_EINVAL, "%s: version: only version 1 is known", path);
        goto end;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (cJSON_IsString(name) && !(g->name = me_strdup(name->valuestring))) { rc = ME_ENOMEM; goto end; }
    g->opset = 17; /* ops are lowered with the semantics of ONNX opset 17 */
    if ((rc = load_inputs(&j, root)) < 0) goto end;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    if (!cJSON_IsArray(layers) || !layers->child) {
        rc = me_error(d, ME_EINVAL, "%s: layers: expected a non-empty list", path);
        goto end;
    }
    /* a layer makes about two values (its output, often a weight): size the
     * maps once rather than rehash a big graph's names again and again */
    int nl = cJSON_GetArraySize(layers);
    if (nl > ME_MAX_NODES) {
        rc = me_error(d, ME_EINVAL, "%s: layers: %d layers, above memest's limit of %d", path, nl, ME_MAX_NODES);
        goto end;
    }
    if (me_graph_reserve(g, g->nv + 2 * nl, nl) < 0 || me_strmap_reserve(&j.latest, (uint32_t)(j.latest.count + nl))) {
        rc = ME_ENOMEM;
        goto end;
    }
    const cJSON *ahead = layers->child;
    for (int k = 0; k < 4 && ahead; k++) ahead = ahead->next;
    for (const cJSON *l = layers->child; l; l = l->next, j.li++) {
        if (ahead) {
            /* the name slots a layer four on will look up: a cache miss
             * each in a big graph, overlapped with this layer's work */
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(ahead, "name");
            if (cJSON_IsString(nm)) {
                char key[256];
                size_t kl = strlen(nm->valuestring);
                me_strmap_prefetch_n(&g->names, nm->valuestring, kl);
                me_strmap_prefetch_n(&j.latest, nm->valuestring, kl);
                if (kl < 200) {
                    me_strmap_prefetch_n(&g->names, key, (size_t)snprintf(key, sizeof(key), "%s.weight", nm->valuestring));
                    me_strmap_prefetch_n(&g->names, key, (size_t)snprintf(key, sizeof(key), "%s.bias", nm->valuestring));
                }
            }
            ahead = ahead->next;
        }
        if ((rc = load_layer(&j, l)) < 0) goto end;
    }
    rc = load_outputs(&j, root);
end:
    me_strmap_free(&j.latest);
    cJSON_Delete(root);
    me_free(buf);
#ifdef __GLIBC__
    /* a big document leaves its tree's millions of small blocks free in the
     * heap: give those pages back before the graph's arrays are made */
    if (len > (64u << 20) && !me_alloc_hooked()) malloc_trim(0);
#endif
    return rc;
}
