/* GGUF headers (llama.cpp's single-file format) into MeLlmConfig: the
 * metadata keys a layer graph needs and every tensor's info, never a
 * weight byte (the file is mapped; only the header's pages are touched).
 *
 * Layout (ggml/docs/gguf.md, gguf.cpp gguf_init_from_file_impl): "GGUF",
 * u32 version (2, 3), u64 tensor count, u64 KV count; each KV a string key
 * (u64 length + bytes), u32 value type, the value (arrays: u32 item type,
 * u64 count, items); each tensor info a string name, u32 n_dims (<= 4),
 * u64 dims (ne[0] innermost), u32 ggml_type, u64 offset from the data
 * start; the data starts at the next multiple of general.alignment (32 by
 * default) after the infos. Every count is checked against the bytes left
 * before anything is allocated for it (a lying count cannot make memest
 * allocate or loop beyond the file). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "load/llm.h"
#include "util.h"

/* ggml's type traits (ggml/src/ggml.c type_traits[]: blck_size,
 * type_size): elements per block and bytes per block. Gaps are types
 * ggml removed (Q4_2, Q4_3, the Q4_0_x_x and IQ4_NL_x_x repacks); enum
 * numbers from ggml/include/ggml.h. */
typedef struct GgmlType {
    const char *name;
    int blck, size;
    MeDType dt; /* MeDType of an unquantized type; U8 for block types */
} GgmlType;

static const GgmlType ggml_types[] = {
    [0] = { "F32", 1, 4, ME_DT_F32 },       [1] = { "F16", 1, 2, ME_DT_F16 },
    [2] = { "Q4_0", 32, 18, ME_DT_U8 },     [3] = { "Q4_1", 32, 20, ME_DT_U8 },
    [6] = { "Q5_0", 32, 22, ME_DT_U8 },     [7] = { "Q5_1", 32, 24, ME_DT_U8 },
    [8] = { "Q8_0", 32, 34, ME_DT_U8 },     [9] = { "Q8_1", 32, 36, ME_DT_U8 },
    [10] = { "Q2_K", 256, 84, ME_DT_U8 },   [11] = { "Q3_K", 256, 110, ME_DT_U8 },
    [12] = { "Q4_K", 256, 144, ME_DT_U8 },  [13] = { "Q5_K", 256, 176, ME_DT_U8 },
    [14] = { "Q6_K", 256, 210, ME_DT_U8 },  [15] = { "Q8_K", 256, 292, ME_DT_U8 },
    [16] = { "IQ2_XXS", 256, 66, ME_DT_U8 }, [17] = { "IQ2_XS", 256, 74, ME_DT_U8 },
    [18] = { "IQ3_XXS", 256, 98, ME_DT_U8 }, [19] = { "IQ1_S", 256, 50, ME_DT_U8 },
    [20] = { "IQ4_NL", 32, 18, ME_DT_U8 },  [21] = { "IQ3_S", 256, 110, ME_DT_U8 },
    [22] = { "IQ2_S", 256, 82, ME_DT_U8 },  [23] = { "IQ4_XS", 256, 136, ME_DT_U8 },
    [24] = { "I8", 1, 1, ME_DT_I8 },        [25] = { "I16", 1, 2, ME_DT_I16 },
    [26] = { "I32", 1, 4, ME_DT_I32 },      [27] = { "I64", 1, 8, ME_DT_I64 },
    [28] = { "F64", 1, 8, ME_DT_F64 },      [29] = { "IQ1_M", 256, 56, ME_DT_U8 },
    [30] = { "BF16", 1, 2, ME_DT_BF16 },    [34] = { "TQ1_0", 256, 54, ME_DT_U8 },
    [35] = { "TQ2_0", 256, 66, ME_DT_U8 },   [39] = { "MXFP4", 32, 17, ME_DT_U8 }, /* e8m0 scale + 16 bytes */
};
#define N_GGML_TYPES ((int)(sizeof(ggml_types) / sizeof(ggml_types[0])))

/* GGUF metadata value types (gguf.h enum gguf_type) and their sizes; 0: variable */
enum { GV_U8, GV_I8, GV_U16, GV_I16, GV_U32, GV_I32, GV_F32, GV_BOOL, GV_STRING, GV_ARRAY, GV_U64, GV_I64, GV_F64, GV_COUNT };
static const int gv_size[GV_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

typedef struct G {
    const unsigned char *p;
    uint64_t n, at;
    const char *path;
    MeDiag *d;
} G;

static int g_short(G *g, const char *what)
{
    return me_error(g->d, ME_EINVAL, "%s: %s runs past the end of the file (at byte %llu of %llu)", g->path, what,
                    (unsigned long long)g->at, (unsigned long long)g->n);
}

static int g_u32(G *g, uint32_t *v, const char *what)
{
    *v = 0;
    if (g->n - g->at < 4) return g_short(g, what);
    for (int i = 3; i >= 0; i--) *v = *v << 8 | g->p[g->at + i];
    g->at += 4;
    return 0;
}

static int g_u64(G *g, uint64_t *v, const char *what)
{
    *v = 0;
    if (g->n - g->at < 8) return g_short(g, what);
    for (int i = 7; i >= 0; i--) *v = *v << 8 | g->p[g->at + i];
    g->at += 8;
    return 0;
}

/* A string: its bytes stay in the mapping; *s points there, unterminated. */
static int g_str(G *g, const char **s, uint64_t *len, const char *what)
{
    *s = NULL;
    int rc = g_u64(g, len, what);
    if (rc < 0) return rc;
    if (*len > g->n - g->at) return g_short(g, what);
    *s = (const char *)g->p + g->at;
    g->at += *len;
    return 0;
}

/* A scalar as a number (integers and floats); false for strings and arrays. */
static bool g_num(const G *g, uint32_t type, uint64_t at, double *v)
{
    const unsigned char *q = g->p + at;
    uint64_t u = 0;
    if (type >= GV_COUNT || !gv_size[type]) return false;
    for (int i = gv_size[type] - 1; i >= 0; i--) u = u << 8 | q[i];
    switch (type) {
    case GV_I8: *v = (int8_t)u; break;
    case GV_I16: *v = (int16_t)u; break;
    case GV_I32: *v = (int32_t)u; break;
    case GV_I64: *v = (double)(int64_t)u; break;
    case GV_F32: { uint32_t w = (uint32_t)u; float f; memcpy(&f, &w, 4); *v = f; break; }
    case GV_F64: { double f; memcpy(&f, &u, 8); *v = f; break; }
    default: *v = (double)u; break;
    }
    return true;
}

/* Skips one value of type, arrays (nested at most twice) included. */
static int g_skip(G *g, uint32_t type, int depth, const char *key)
{
    if (type >= GV_COUNT) return me_error(g->d, ME_EINVAL, "%s: key '%s' has value type %u, not a GGUF type", g->path, key, type);
    if (gv_size[type]) {
        if (g->n - g->at < (uint64_t)gv_size[type]) return g_short(g, key);
        g->at += (uint64_t)gv_size[type];
        return 0;
    }
    if (type == GV_STRING) {
        const char *s;
        uint64_t l;
        return g_str(g, &s, &l, key);
    }
    uint32_t it;
    uint64_t cnt;
    int rc;
    if (depth >= 2) return me_error(g->d, ME_EINVAL, "%s: key '%s': arrays nested deeper than 2", g->path, key);
    if ((rc = g_u32(g, &it, key)) < 0 || (rc = g_u64(g, &cnt, key)) < 0) return rc;
    if (it >= GV_COUNT) return me_error(g->d, ME_EINVAL, "%s: key '%s': array of value type %u, not a GGUF type", g->path, key, it);
    /* every item takes at least its size (8 for a string's length): a count
     * the rest of the file cannot hold is a lie, refused before looping */
    uint64_t least = gv_size[it] ? (uint64_t)gv_size[it] : it == GV_STRING ? 8 : 12;
    if (cnt > (g->n - g->at) / least)
        return me_error(g->d, ME_EINVAL, "%s: key '%s': an array of %llu items cannot fit in the %llu bytes left", g->path,
                        key, (unsigned long long)cnt, (unsigned long long)(g->n - g->at));
    if (gv_size[it]) {
        g->at += cnt * (uint64_t)gv_size[it];
        return 0;
    }
    for (uint64_t i = 0; i < cnt; i++)
        if ((rc = g_skip(g, it, depth + 1, key)) < 0) return rc;
    return 0;
}

/* The architecture's keys memest needs, into c (an integer key must be a
 * whole number in [1, hi]). */
typedef struct GKey {
    const char *suffix; /* after "<arch>." */
    int64_t *field;
    int64_t hi;
} GKey;

static int g_set_int(G *g, const char *key, double v, int64_t hi, int64_t *out)
{
    if (!(v >= 1 && v <= (double)hi) || v != (double)(int64_t)v)
        return me_error(g->d, ME_EINVAL, "%s: key '%s' is %g; expected a whole number from 1 to %lld", g->path, key, v,
                        (long long)hi);
    *out = (int64_t)v;
    return 0;
}

int me_gguf_parse(MeLlmConfig *c, const char *path, const void *buf, uint64_t n, MeDiag *d)
{
    G g = { buf, n, 0, path, d };
    uint32_t magic, version;
    uint64_t nt, nkv;
    int rc;
    if ((rc = g_u32(&g, &magic, "the magic")) < 0) return rc;
    if (magic != 0x46554747u) return me_error(d, ME_EINVAL, "%s: not a GGUF file (no \"GGUF\" magic)", path);
    if ((rc = g_u32(&g, &version, "the version")) < 0) return rc;
    if (version < 2 || version > 3) return me_error(d, ME_EINVAL, "%s: GGUF version %u; memest reads versions 2 and 3", path, version);
    if ((rc = g_u64(&g, &nt, "the tensor count")) < 0 || (rc = g_u64(&g, &nkv, "the key count")) < 0) return rc;
    /* a KV takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8 */
    if (nkv > (n - g.at) / 13) return me_error(d, ME_EINVAL, "%s: %llu metadata keys cannot fit in the file", path, (unsigned long long)nkv);
    if (nt > (n - g.at) / 32 || nt > (1u << 20))
        return me_error(d, ME_EINVAL, "%s: %llu tensors cannot fit in the file", path, (unsigned long long)nt);

    char arch[32] = "";
    uint64_t alignment = 32;
    int64_t vocab = 0;
    int64_t ints[8] = { 0 };
    double theta = 0, eps = 0;
    static const char *const isuf[8] = { "block_count", "embedding_length", "attention.head_count", "attention.head_count_kv",
                                         "feed_forward_length", "context_length", "expert_count", "expert_used_count" };
    static const int64_t ihi[8] = { 1 << 20, 1 << 24, 1 << 16, 1 << 16, 1 << 26, INT64_C(1) << 40, 1 << 16, 1 << 16 };
    for (uint64_t k = 0; k < nkv; k++) {
        const char *key;
        uint64_t kl;
        uint32_t type;
        char kbuf[256];
        if ((rc = g_str(&g, &key, &kl, "a metadata key")) < 0 || (rc = g_u32(&g, &type, "a value type")) < 0) return rc;
        snprintf(kbuf, sizeof(kbuf), "%.*s", (int)(kl < 255 ? kl : 255), key);
        if (kl >= 255 || strlen(kbuf) != kl || !me_utf8_valid(kbuf))
            return me_error(d, ME_EINVAL, "%s: metadata key '%s' is not a short UTF-8 name", path, kbuf);
        uint64_t vat = g.at;
        if (!strcmp(kbuf, "general.architecture") && type == GV_STRING) {
            const char *s;
            uint64_t sl;
            if ((rc = g_str(&g, &s, &sl, kbuf)) < 0) return rc;
            if (sl == 0 || sl >= sizeof(arch) || memchr(s, 0, sl))
                return me_error(d, ME_EINVAL, "%s: general.architecture is not a short name", path);
            memcpy(arch, s, sl);
            arch[sl] = 0;
            continue;
        }
        if (!strcmp(kbuf, "tokenizer.ggml.tokens") && type == GV_ARRAY) {
            uint64_t save = g.at, cnt;
            uint32_t it;
            if ((rc = g_u32(&g, &it, kbuf)) < 0 || (rc = g_u64(&g, &cnt, kbuf)) < 0) return rc;
            vocab = cnt > (uint64_t)(1 << 24) ? -1 : (int64_t)cnt;
            g.at = save;
        }
        if ((rc = g_skip(&g, type, 0, kbuf)) < 0) return rc;
        double v;
        if (!g_num(&g, type, vat, &v)) continue;
        if (!strcmp(kbuf, "general.alignment")) {
            if (!(v >= 1 && v <= 1 << 20) || ((uint64_t)v & ((uint64_t)v - 1)))
                return me_error(d, ME_EINVAL, "%s: general.alignment %g is not a power of two up to 2^20", path, v);
            alignment = (uint64_t)v;
            continue;
        }
        size_t al = strlen(arch);
        /* keys of the architecture; general.architecture comes first in files llama.cpp writes */
        if (!al || strncmp(kbuf, arch, al) || kbuf[al] != '.') continue;
        const char *suf = kbuf + al + 1;
        for (int i = 0; i < 8; i++)
            if (!strcmp(suf, isuf[i]) && (rc = g_set_int(&g, kbuf, v, ihi[i], &ints[i])) < 0) return rc;
        if (!strcmp(suf, "rope.freq_base")) theta = v;
        if (!strcmp(suf, "attention.layer_norm_rms_epsilon")) eps = v;
    }
    if (vocab < 0) return me_error(d, ME_EINVAL, "%s: tokenizer.ggml.tokens holds more than 2^24 tokens", path);

    int first = c->n_tensors, cap = c->n_tensors;
    MeLlmSpan *spans = me_calloc((size_t)nt + 1, sizeof(MeLlmSpan));
    MeStrMap seen = { 0 };
    if (!spans) return me_error(d, ME_ENOMEM, "%s: out of memory", path);
    rc = 0;
    for (uint64_t t = 0; t < nt && rc == 0; t++) {
        const char *nm;
        uint64_t nl;
        uint32_t nd, type;
        char name[256];
        if ((rc = g_str(&g, &nm, &nl, "a tensor name")) < 0) break;
        snprintf(name, sizeof(name), "%.*s", (int)(nl < 255 ? nl : 255), nm);
        if (nl >= 255 || strlen(name) != nl || !me_utf8_valid(name)) {
            rc = me_error(d, ME_EINVAL, "%s: tensor name '%s' is not a short UTF-8 name", path, name);
            break;
        }
        if ((rc = g_u32(&g, &nd, name)) < 0) break;
        if (nd > 4) { /* GGML_MAX_DIMS */
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' has %u dims; ggml has at most 4", path, name, nd);
            break;
        }
        MeShape sh = { 0 };
        uint64_t ne[4], numel = 1;
        for (uint32_t i = 0; i < nd && rc == 0; i++) {
            rc = g_u64(&g, &ne[i], name);
            numel = me_smul(numel, ne[i]);
        }
        if (rc < 0) break;
        if (numel > (uint64_t)INT64_MAX) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s': its element count overflows", path, name);
            break;
        }
        sh.rank = (int)nd; /* PyTorch order: outermost first */
        for (uint32_t i = 0; i < nd; i++) sh.d[i] = (int64_t)ne[nd - 1 - i];
        uint64_t off;
        if ((rc = g_u32(&g, &type, name)) < 0 || (rc = g_u64(&g, &off, name)) < 0) break;
        const GgmlType *gt = type < (uint32_t)N_GGML_TYPES && ggml_types[type].name ? &ggml_types[type] : NULL;
        if (!gt) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' has ggml type %u, which memest does not know", path, name, type);
            break;
        }
        if ((nd ? ne[0] : numel) % (uint64_t)gt->blck) { /* blocks run along rows (ne[0]) */
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s': %s rows of %llu elements are not whole blocks of %d", path, name,
                          gt->name, (unsigned long long)(nd ? ne[0] : numel), gt->blck);
            break;
        }
        if (me_strmap_get(&seen, name) >= 0) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' is named twice", path, name);
            break;
        }
        uint64_t bytes = me_smul(numel / (uint64_t)gt->blck, (uint64_t)gt->size);
        if ((rc = me_grow(&c->tensors, &cap, c->n_tensors + 1, sizeof(MeLlmTensor))) < 0) {
            rc = me_error(d, ME_ENOMEM, "%s: out of memory", path);
            break;
        }
        MeLlmTensor *mt = &c->tensors[c->n_tensors];
        memset(mt, 0, sizeof(*mt));
        if (!(mt->name = me_strdup(name)) || me_strmap_put(&seen, mt->name, c->n_tensors) < 0) {
            me_free(mt->name);
            rc = me_error(d, ME_ENOMEM, "%s: out of memory", path);
            break;
        }
        mt->dtype = gt->dt;
        mt->shape = sh;
        mt->bytes = bytes;
        mt->params = numel;
        mt->gguf_type = (int)type;
        spans[c->n_tensors - first] = (MeLlmSpan){ off, me_sadd(off, bytes), c->n_tensors };
        c->n_tensors++;
    }
    /* the data: aligned after the infos, each tensor aligned, none
     * overlapping another or running past the end of the file */
    uint64_t data = rc == 0 ? me_sadd(g.at, (alignment - g.at % alignment) % alignment) : 0;
    int ns = c->n_tensors - first;
    if (rc == 0) qsort(spans, (size_t)ns, sizeof(MeLlmSpan), me_llm_span_cmp);
    for (int i = 0; i < ns && rc == 0; i++) {
        const char *tn = c->tensors[spans[i].ti].name;
        if (spans[i].begin % alignment)
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' at data offset %llu is not aligned to %llu", path, tn,
                          (unsigned long long)spans[i].begin, (unsigned long long)alignment);
        else if (i && spans[i].begin < spans[i - 1].end)
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' (data offset %llu) overlaps '%s'", path, tn,
                          (unsigned long long)spans[i].begin, c->tensors[spans[i - 1].ti].name);
        else if (me_sadd(data, spans[i].end) > n)
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' ends at byte %llu, past the end of the file (%llu bytes)", path, tn,
                          (unsigned long long)me_sadd(data, spans[i].end), (unsigned long long)n);
    }
    if (rc == 0 && !arch[0]) rc = me_error(d, ME_EINVAL, "%s: no general.architecture key", path);
    if (rc == 0) {
        if (!c->family[0]) snprintf(c->family, sizeof(c->family), "%s", arch);
        int64_t *f[8] = { &c->layers, &c->hidden, &c->heads, &c->kv_heads, &c->intermediate, &c->max_pos, &c->experts,
                          &c->experts_per_tok };
        for (int i = 0; i < 8; i++)
            if (ints[i]) *f[i] = ints[i];
        if (!c->kv_heads) c->kv_heads = c->heads;
        if (c->heads && !c->head_dim) c->head_dim = c->hidden / c->heads;
        if (vocab) c->vocab = vocab;
        if (theta > 0) c->rope_theta = theta;
        if (eps > 0) c->norm_eps = eps;
        c->tied = me_strmap_get(&seen, "output.weight") < 0;
        c->quant = ME_LLM_Q_GGUF;
        if (c->dtype == ME_DT_UNDEF) c->dtype = ME_DT_F32; /* llama.cpp's activations are F32 whatever the weights */
    }
    if (rc < 0) {
        for (int i = first; i < c->n_tensors; i++) me_free(c->tensors[i].name);
        c->n_tensors = first;
    }
    me_strmap_free(&seen);
    me_free(spans);
    return rc < 0 ? rc : 0;
}

int me_gguf_read(MeLlmConfig *c, const char *file, MeDiag *d)
{
    int fd = me_open_regular(file, file, d);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < 24) {
        close(fd);
        return me_error(d, ME_EINVAL, "%s: too short for a GGUF file", file);
    }
    /* mapped, not read: only the header's pages are ever touched */
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return me_error(d, ME_EIO, "%s: cannot map: %s", file, strerror(errno));
    int rc = me_gguf_parse(c, file, m, (uint64_t)st.st_size, d);
    munmap(m, (size_t)st.st_size);
    return rc;
}
