/* torch.export-based ONNX exports (onnx_torch.h).
 *
 * The exporter (torch/onnx/_internal/exporter/_core.py, _set_node_metadata)
 * writes on every node it converts from an FX node:
 *   pkg.torch.onnx.name_scopes = repr([ '', 'layer1', 'layer1.0',
 *                                       'layer1.0.conv1', 'conv2d' ])
 * the qualified names of the modules in the node's nn_module_stack, root
 * first, then the FX node's own name. nn_module_stack holds the modules
 * whose forward was running, so a ModuleList that its parent iterates
 * (`for blk in self.h: x = blk(x)`) never appears: 'h.0' follows ''.
 * TorchScript's exporter spelled the same facts as "/h.0/attn/MatMul" and
 * "/layer1/layer1.0/conv1/Conv", which the ONNX loader reads; this file
 * writes that spelling, so both exports reach one reading.
 *
 * Beside the graph, ModelProto.metadata_props holds the ExportedProgram's
 * graph signature as text, one input a line:
 *   p_conv1_weight: PARAMETER target='conv1.weight'
 *   b_bn1_running_mean: BUFFER target='bn1.running_mean' persistent=True
 *   c_lifted_tensor_0: CONSTANT_TENSOR target='lifted_tensor_0'
 * (torch.export.graph_signature.InputSpec's str), and the stored tensors
 * are named by their targets. A TorchScript export cannot tell a
 * register_buffer table from an nn.Parameter; this one can. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load/onnx_torch.h"

/* The items of a Python list-of-str repr: [(p, len)...], n items; -1 when
 * s is not one (an escape or a '/', which names never hold, included). */
static int py_str_list(const char *s, size_t len, const char **item, size_t *ilen, int max)
{
    size_t i = 0;
    int n = 0;
    while (i < len && s[i] == ' ') i++;
    if (i >= len || s[i++] != '[') return -1;
    for (;;) {
        while (i < len && s[i] == ' ') i++;
        if (i < len && s[i] == ']' && n == 0) return 0;
        if (i >= len || (s[i] != '\'' && s[i] != '"')) return -1;
        char q = s[i++];
        size_t b = i;
        while (i < len && s[i] != q) {
            if (s[i] == '\\' || s[i] == '/') return -1; /* no module or FX node name has either */
            i++;
        }
        if (i >= len || n >= max) return -1;
        item[n] = s + b;
        ilen[n++] = i - b;
        i++;
        while (i < len && s[i] == ' ') i++;
        if (i < len && s[i] == ',') { i++; continue; }
        return i < len && s[i] == ']' ? n : -1;
    }
}

/* a is b's module or one of its parents: a prefix ending at a '.' */
static bool encloses(const char *a, size_t al, const char *b, size_t bl)
{
    return al < bl && !memcmp(a, b, al) && b[al] == '.';
}

/* "/" seg "/" seg ... "/" leaf, each seg a module's name below the
 * previous one ("layer1", "0", "conv1"; "h.0" under an uncalled h) with
 * "_<k>" on its k-th call after the first, as TorchScript writes; m = 0:
 * an op of the root forward, "/leaf". In g's arena; NULL: no memory. */
static char *scoped_string(MeGraph *g, const char **mod, const size_t *ml, const int *inst, int m, const char *leaf,
                           size_t leaf_len)
{
    size_t total = 2 + leaf_len;
    for (int i = 0; i < m; i++) total += ml[i] + 13;
    char *s = me_arena_alloc(&g->arena, total);
    if (!s) return NULL;
    size_t o = 0;
    for (int i = 0; i < m; i++) {
        size_t skip = i ? ml[i - 1] + 1 : 0;
        s[o++] = '/';
        memcpy(s + o, mod[i] + skip, ml[i] - skip);
        o += ml[i] - skip;
        if (inst[i]) o += (size_t)snprintf(s + o, total - o, "_%d", inst[i]);
    }
    s[o++] = '/';
    memcpy(s + o, leaf, leaf_len);
    o += leaf_len;
    s[o] = 0;
    return s;
}

char *me_torch_root_name(MeGraph *g, const char *name) { return scoped_string(g, NULL, NULL, NULL, 0, name, strlen(name)); }

int me_torch_scoped_name(MeGraph *g, MeTorchScopes *ts, const char *v, size_t len, char **out)
{
    const char *item[ME_TORCH_MAX_DEPTH + 2];
    size_t il[ME_TORCH_MAX_DEPTH + 2];
    *out = NULL;
    int n = py_str_list(v, len, item, il, ME_TORCH_MAX_DEPTH + 2);
    if (n < 1) return 0;
    /* the modules: between the root ('') and the FX node's name; a stack
     * whose entries do not nest (torch.export drops those, _fix_nn_module_stacks)
     * keeps the chain of the innermost */
    const char *leaf = item[n - 1];
    size_t leaf_len = il[n - 1];
    int first = n > 1 && il[0] == 0 ? 1 : 0, last = n - 2;
    const char *mod[ME_TORCH_MAX_DEPTH];
    size_t ml[ME_TORCH_MAX_DEPTH];
    int m = 0;
    for (int i = first; first && i <= last; i++) {
        if (!il[i]) continue;
        if (i < last && !encloses(item[i], il[i], item[last], il[last])) continue;
        if (m && !encloses(mod[m - 1], ml[m - 1], item[i], il[i])) continue;
        mod[m] = item[i];
        ml[m++] = il[i];
    }
    /* the calls still open from the previous node, then new ones; a node
     * with no module stack at all (no root: the exporter's own, not the
     * model's) leaves them open and is an op of the root forward */
    int inst[ME_TORCH_MAX_DEPTH];
    int keep = 0;
    while (keep < m && keep < ts->nopen && strlen(ts->open[keep].path) == ml[keep] &&
           !memcmp(ts->open[keep].path, mod[keep], ml[keep])) {
        inst[keep] = ts->open[keep].inst;
        keep++;
    }
    for (int i = keep; i < m; i++) {
        int c = me_strmap_get_n(&ts->calls, mod[i], ml[i]);
        if (c < 0) c = 0;
        /* one copy a call (the map keeps the first as its key) */
        const char *key = me_arena_strndup(&g->arena, mod[i], ml[i]);
        if (!key || me_strmap_put(&ts->calls, key, c + 1) < 0) return ME_ENOMEM;
        ts->open[i].path = key;
        ts->open[i].inst = inst[i] = c;
    }
    if (first) ts->nopen = m;
    return (*out = scoped_string(g, mod, ml, inst, m, leaf, leaf_len)) ? 0 : ME_ENOMEM;
}

void me_torch_scopes_free(MeTorchScopes *ts) { me_strmap_free(&ts->calls); }

int me_torch_signature(MeGraph *g, const char *sig, size_t len)
{
    int named = 0;
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && sig[e] != '\n') e++;
        const char *l = sig + i;
        size_t ll = e - i;
        i = e + 1;
        if (ll && l[0] == '#' && ll >= 9 && !memcmp(l, "# outputs", 9)) break;
        const char *colon = memchr(l, ':', ll);
        if (!colon) continue;
        const char *kind = colon + 1;
        while (kind < l + ll && *kind == ' ') kind++;
        const char *t = NULL;
        for (const char *p = kind; p + 8 <= l + ll && !t; p++)
            if (!memcmp(p, "target='", 8)) t = p + 8;
        if (!t) continue;
        const char *te = memchr(t, '\'', (size_t)(l + ll - t));
        if (!te || te == t || te - t > 4096) continue;
        char name[4097];
        memcpy(name, t, (size_t)(te - t));
        name[te - t] = 0;
        int v = me_graph_find(g, name);
        if (v < 0 || g->v[v].kind != ME_V_INIT) continue;
        MeValue *x = &g->v[v];
        size_t kl = (size_t)(l + ll - kind);
        if (kl >= 9 && !memcmp(kind, "PARAMETER", 9)) {
            x->kind_stated = true;
        } else if ((kl >= 6 && !memcmp(kind, "BUFFER", 6)) || (kl >= 15 && !memcmp(kind, "CONSTANT_TENSOR", 15))) {
            x->kind_stated = x->buffer_known = true;
            x->role = ME_R_BUFFER;
        } else {
            continue;
        }
        named++;
    }
    return named;
}

int me_torch_version(MeGraph *g, const char *version)
{
    char *end;
    long major = strtol(version, &end, 10);
    if (end == version || major < 1 || major > 99) return 0; /* not a version: nothing stated */
    if (!(g->torch_version = me_graph_strdup(g, version))) return ME_ENOMEM;
    g->torch_major = (int)major;
    if (major < 2) return 0;
    char e[80];
    return me_graph_add_note(g, "torch_version", ME_NOTE_ALWAYS,
                             "the file was written by PyTorch %s (its producer_version): where torch 1.13's code and "
                             "2's differ (nn.MultiheadAttention's attention, what a mean over dims saves, the optimizers' "
                             "default paths), memest follows torch 2's unless --torch 1.13 is given",
                             me_escape(version, e, sizeof(e)));
}
