/* safetensors headers into MeLlmConfig.tensors, never a weight byte.
 *
 * A file is 8 bytes of little-endian header length N, N bytes of JSON
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
 * {str: str}}, then the data (offsets relative to its start). The checks
 * are those of the safetensors crate (huggingface/safetensors,
 * safetensors/src/tensor.rs: MAX_HEADER_SIZE = 100_000_000; validate():
 * sorted by offset, each tensor starts where the previous ended, its size
 * is numel x dtype size, the last one ends where the file does), plus caps
 * on nesting and on the number of JSON values (a 100 MB header of "[0,0,"
 * would otherwise become 50 M cJSON nodes).
 *
 * Pre-quantized checkpoints keep the unquantized model's parameters in
 * other shapes; each tensor gets the logical parameter count it stands
 * for (MeLlmTensor.params) and the quantizer's own state counts 0:
 *   GPTQ (AutoGPTQ qlinear: qweight I32 [in*bits/32, out], qzeros I32
 *     [in/group, out*bits/32], scales F16 [in/group, out], g_idx I32 [in]);
 *   AWQ (AutoAWQ WQLinear_GEMM: qweight I32 [in, out*bits/32], qzeros the
 *     same as GPTQ's, scales [in/group, out]);
 *   bitsandbytes LLM.int8 (bnb.nn.Linear8bitLt._save_to_state_dict: weight
 *     I8 [out, in], SCB F32 [out], weight_format U8);
 *   bitsandbytes 4-bit (Params4bit: weight U8 [ceil(n/2), 1] two values a
 *     byte; QuantState.as_dict(packed=True): weight.absmax,
 *     weight.quant_map, weight.nested_absmax, weight.nested_quant_map,
 *     weight.quant_state.bitsandbytes__nf4|fp4);
 *   fp8 (compressed-tensors / DeepSeek-V3: weight F8 [out, in] with
 *     weight_scale or weight_scale_inv, input_scale). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "load/llm.h"
#include "util.h"

#define ST_MAX_HEADER 100000000u  /* the safetensors crate's MAX_HEADER_SIZE */
#define ST_MAX_DEPTH 4            /* root { tensor { "shape": [ ] } } */
#define ST_MAX_VALUES (1u << 22)  /* ~8 values a tensor: 500 k tensors; DeepSeek-V3 has 92 k */
#define ST_MAX_TENSORS (1 << 20)

/* safetensors' Dtype spellings (safetensors/src/tensor.rs) */
static const struct {
    const char *name;
    MeDType dt;
} st_dtypes[] = {
    { "F64", ME_DT_F64 }, { "F32", ME_DT_F32 }, { "F16", ME_DT_F16 }, { "BF16", ME_DT_BF16 },
    { "I64", ME_DT_I64 }, { "I32", ME_DT_I32 }, { "I16", ME_DT_I16 }, { "I8", ME_DT_I8 },
    { "U64", ME_DT_U64 }, { "U32", ME_DT_U32 }, { "U16", ME_DT_U16 }, { "U8", ME_DT_U8 },
    { "BOOL", ME_DT_BOOL }, { "F8_E4M3", ME_DT_F8E4M3FN }, { "F8_E5M2", ME_DT_F8E5M2 },
    { "C64", ME_DT_C64 },
};

static const char *const quant_names[] = {
    [ME_LLM_Q_NONE] = "none", [ME_LLM_Q_INT8] = "bitsandbytes int8", [ME_LLM_Q_NF4] = "bitsandbytes 4-bit",
    [ME_LLM_Q_GPTQ] = "GPTQ", [ME_LLM_Q_AWQ] = "AWQ", [ME_LLM_Q_FP8] = "fp8", [ME_LLM_Q_GGUF] = "GGUF",
};

const char *me_llm_quant_name(MeLlmQuant q)
{
    return (unsigned)q < sizeof(quant_names) / sizeof(quant_names[0]) && quant_names[q] ? quant_names[q] : "?";
}

void me_llm_tensors_free(MeLlmConfig *c)
{
    for (int i = 0; i < c->n_tensors; i++) me_free(c->tensors[i].name);
    me_free(c->tensors);
    c->tensors = NULL;
    c->n_tensors = 0;
}

/* Nesting depth and value count of JSON text, strings skipped: refused
 * before cJSON builds anything. */
static int st_scan(const char *s, size_t n, const char *path, MeDiag *d)
{
    int depth = 0;
    size_t values = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
        } else if (ch == '{' || ch == '[') {
            if (++depth > ST_MAX_DEPTH)
                return me_error(d, ME_EINVAL, "%s: header nests deeper than %d levels; not a safetensors header", path, ST_MAX_DEPTH);
            values++;
        } else if (ch == '}' || ch == ']') {
            depth--;
        } else if (ch == ',') {
            values++;
        }
        if (values > ST_MAX_VALUES)
            return me_error(d, ME_EINVAL, "%s: header holds more than %u JSON values; refused", path, ST_MAX_VALUES);
    }
    return 0;
}

/* A JSON number that is a whole number in [0, 2^53] (cJSON keeps doubles). */
static bool st_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return false;
    double x = v->valuedouble;
    if (!(x >= 0 && x <= 9007199254740992.0) || x != (double)(uint64_t)x) return false;
    *out = (uint64_t)x;
    return true;
}

int me_llm_span_cmp(const void *a, const void *b)
{
    const MeLlmSpan *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

static int st_add_tensor(MeLlmConfig *c, int *cap, const char *name, MeDType dt, const MeShape *sh, uint64_t bytes)
{
    if (c->n_tensors >= ST_MAX_TENSORS) return ME_EINVAL;
    if (me_grow(&c->tensors, cap, c->n_tensors + 1, sizeof(MeLlmTensor)) < 0) return ME_ENOMEM;
    MeLlmTensor *t = &c->tensors[c->n_tensors];
    memset(t, 0, sizeof(*t));
    if (!(t->name = me_strdup(name))) return ME_ENOMEM;
    t->dtype = dt;
    t->shape = *sh;
    t->bytes = bytes;
    t->params = me_shape_numel(sh) < 0 ? 0 : (uint64_t)me_shape_numel(sh);
    t->gguf_type = -1;
    c->n_tensors++;
    return 0;
}

int me_safetensors_parse(MeLlmConfig *c, const char *path, const void *buf, size_t n, uint64_t file_size, MeDiag *d)
{
    const unsigned char *p = buf;
    if (n < 8 || file_size < 8)
        return me_error(d, ME_EINVAL, "%s: %llu bytes, too short for a safetensors file (8-byte header length first)",
                        path, (unsigned long long)file_size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | p[i];
    if (hlen > ST_MAX_HEADER)
        return me_error(d, ME_EINVAL, "%s: header length %llu is over safetensors' limit of %u bytes",
                        path, (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > file_size - 8 || hlen > n - 8)
        return me_error(d, ME_EINVAL, "%s: header length %llu runs past the end of the file (%llu bytes)",
                        path, (unsigned long long)hlen, (unsigned long long)file_size);
    if (hlen < 2 || p[8] != '{')
        return me_error(d, ME_EINVAL, "%s: the header is not a JSON object", path);
    const char *text = (const char *)p + 8;
    int rc = st_scan(text, (size_t)hlen, path, d);
    if (rc < 0) return rc;
    uint64_t data_len = file_size - 8 - hlen;

    cJSON *root = cJSON_ParseWithLength(text, (size_t)hlen);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return me_error(d, ME_EINVAL, "%s: the header is not valid JSON", path);
    }
    int first = c->n_tensors, cap = c->n_tensors;
    int count = 0;
    for (const cJSON *e = root->child; e; e = e->next) count++;
    MeLlmSpan *spans = me_calloc((size_t)count + 1, sizeof(MeLlmSpan));
    MeStrMap seen = { 0 };
    if (!spans) {
        rc = me_error(d, ME_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    int ns = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        const char *name = e->string ? e->string : "";
        if (!me_utf8_valid(name)) {
            rc = me_error(d, ME_EINVAL, "%s: a tensor name is not valid UTF-8", path);
            goto out;
        }
        if (me_strmap_get(&seen, name) >= 0) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' is named twice in the header", path, name);
            goto out;
        }
        if (me_strmap_put(&seen, name, 1) < 0) {
            rc = me_error(d, ME_ENOMEM, "%s: out of memory", path);
            goto out;
        }
        if (!strcmp(name, "__metadata__")) {
            /* free-form str -> str (the crate's HashMap<String, String>) */
            bool ok = cJSON_IsObject(e);
            for (const cJSON *m = ok ? e->child : NULL; m; m = m->next) ok &= cJSON_IsString(m);
            if (!ok) {
                rc = me_error(d, ME_EINVAL, "%s: __metadata__ must map strings to strings", path);
                goto out;
            }
            continue;
        }
        const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsObject(e) || !cJSON_IsString(jd) || !cJSON_IsArray(js) || !cJSON_IsArray(jo)) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' needs \"dtype\" (string), \"shape\" and \"data_offsets\" (arrays)", path, name);
            goto out;
        }
        MeDType dt = ME_DT_UNDEF;
        for (size_t k = 0; k < sizeof(st_dtypes) / sizeof(st_dtypes[0]); k++)
            if (!strcmp(jd->valuestring, st_dtypes[k].name)) dt = st_dtypes[k].dt;
        if (dt == ME_DT_UNDEF) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' has dtype '%s', which memest does not know (F64 F32 F16 BF16 "
                          "I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E4M3 F8_E5M2 C64)", path, name, jd->valuestring);
            goto out;
        }
        MeShape sh = { 0 };
        uint64_t numel = 1;
        for (const cJSON *x = js->child; x; x = x->next) {
            uint64_t v;
            if (sh.rank == ME_MAX_RANK || !st_uint(x, &v)) {
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s': shape must be at most %d whole numbers >= 0",
                              path, name, ME_MAX_RANK);
                goto out;
            }
            sh.d[sh.rank++] = (int64_t)v;
            if ((numel = me_smul(numel, v)) > (uint64_t)INT64_MAX) {
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s': shape's element count overflows", path, name);
                goto out;
            }
        }
        uint64_t bytes = me_smul(numel, (uint64_t)me_dtype_size(dt));
        uint64_t b, en;
        if (cJSON_GetArraySize(jo) != 2 || !st_uint(jo->child, &b) || !st_uint(jo->child->next, &en) || b > en) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s': data_offsets must be [begin, end] with begin <= end", path, name);
            goto out;
        }
        if (en > data_len) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s' ends at data offset %llu, past the end of the file (%llu data bytes)",
                          path, name, (unsigned long long)en, (unsigned long long)data_len);
            goto out;
        }
        if (bytes == UINT64_MAX) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s': its byte count overflows", path, name);
            goto out;
        }
        if (en - b != bytes) {
            rc = me_error(d, ME_EINVAL, "%s: tensor '%s': %llu elements of %s are %llu bytes, but data_offsets span %llu",
                          path, name, (unsigned long long)numel, jd->valuestring, (unsigned long long)bytes,
                          (unsigned long long)(en - b));
            goto out;
        }
        if ((rc = st_add_tensor(c, &cap, name, dt, &sh, bytes)) < 0) {
            rc = me_error(d, rc, "%s: %s", path, rc == ME_ENOMEM ? "out of memory" : "too many tensors");
            goto out;
        }
        spans[ns++] = (MeLlmSpan){ b, en, c->n_tensors - 1 };
    }
    /* contiguous in offset order, no hole, no overlap, up to the file's end */
    qsort(spans, (size_t)ns, sizeof(MeLlmSpan), me_llm_span_cmp);
    uint64_t at = 0;
    for (int i = 0; i < ns; i++) {
        if (spans[i].begin != at) {
            const char *tn = c->tensors[spans[i].ti].name;
            rc = spans[i].begin < at
               ? me_error(d, ME_EINVAL, "%s: tensor '%s' (data offsets %llu..%llu) overlaps the tensor before it",
                          path, tn, (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end)
               : me_error(d, ME_EINVAL, "%s: tensor '%s' starts at data offset %llu, leaving a hole after offset %llu",
                          path, tn, (unsigned long long)spans[i].begin, (unsigned long long)at);
            goto out;
        }
        at = spans[i].end;
    }
    if (at != data_len)
        rc = me_error(d, ME_EINVAL, "%s: the tensors' data ends at offset %llu but the file holds %llu data bytes",
                      path, (unsigned long long)at, (unsigned long long)data_len);
out:
    if (rc < 0) { /* leave c as it was */
        for (int i = first; i < c->n_tensors; i++) me_free(c->tensors[i].name);
        c->n_tensors = first;
    }
    me_strmap_free(&seen);
    me_free(spans);
    cJSON_Delete(root);
    return rc < 0 ? rc : 0;
}

/* Reads a whole small file (an index) or the header of a safetensors file. */
static int st_read_file(MeLlmConfig *c, const char *file, MeDiag *d)
{
    int fd = me_open_regular(file, file, d);
    if (fd < 0) return fd;
    struct stat st;
    unsigned char head[8];
    char *buf = NULL;
    int rc;
    if (fstat(fd, &st) < 0 || pread(fd, head, 8, 0) != 8) {
        rc = me_error(d, ME_EINVAL, "%s: too short for a safetensors file (8-byte header length first)", file);
        goto out;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | head[i];
    if (hlen > ST_MAX_HEADER || hlen > (uint64_t)st.st_size - 8) { /* parse says which */
        rc = me_safetensors_parse(c, file, head, 8, (uint64_t)st.st_size, d);
        goto out;
    }
    if (!(buf = me_malloc((size_t)hlen + 8))) {
        rc = me_error(d, ME_ENOMEM, "%s: out of memory for a %llu-byte header", file, (unsigned long long)hlen);
        goto out;
    }
    memcpy(buf, head, 8);
    for (size_t got = 0; got < hlen;) {
        ssize_t r = pread(fd, buf + 8 + got, (size_t)hlen - got, (off_t)(8 + got));
        if (r <= 0) {
            rc = me_error(d, ME_EIO, "%s: cannot read the header: %s", file, r < 0 ? strerror(errno) : "file shrank");
            goto out;
        }
        got += (size_t)r;
    }
    rc = me_safetensors_parse(c, file, buf, (size_t)hlen + 8, (uint64_t)st.st_size, d);
out:
    me_free(buf);
    close(fd);
    return rc;
}

static char *st_slurp(const char *file, size_t cap, size_t *len, MeDiag *d)
{
    int fd = me_open_regular(file, file, d);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size > cap) {
        me_error(d, ME_EINVAL, "%s: over %zu bytes; not an index of shards", file, cap);
    } else if (!(buf = me_malloc((size_t)st.st_size + 1))) {
        me_error(d, ME_ENOMEM, "%s: out of memory", file);
    } else {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        buf[got] = 0;
        *len = got;
    }
    close(fd);
    return buf;
}

static void st_dirname(const char *file, char *dir, size_t n)
{
    const char *slash = strrchr(file, '/');
    if (!slash) snprintf(dir, n, ".");
    else snprintf(dir, n, "%.*s", (int)(slash - file) > 0 ? (int)(slash - file) : 1, file);
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard}};
 * every shard named is read, and every tensor named must be in its shard. */
static int st_read_index(MeLlmConfig *c, const char *file, MeDiag *d)
{
    size_t len = 0;
    char *text = st_slurp(file, ST_MAX_HEADER, &len, d);
    if (!text) return d->code ? d->code : ME_EIO;
    int rc = st_scan(text, len, file, d);
    cJSON *root = rc < 0 ? NULL : cJSON_ParseWithLength(text, len);
    me_free(text);
    if (rc < 0) return rc;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm) || !wm->child) {
        cJSON_Delete(root);
        return me_error(d, ME_EINVAL, "%s: no \"weight_map\" object naming each tensor's shard", file);
    }
    char dir[1024], shard[2048];
    st_dirname(file, dir, sizeof(dir));
    MeStrMap shards = { 0 }, names = { 0 };
    int first = c->n_tensors;
    rc = 0;
    for (const cJSON *e = wm->child; e && rc == 0; e = e->next) {
        const char *sn = cJSON_IsString(e) ? e->valuestring : NULL;
        /* a shard is a file beside the index: no path may lead elsewhere */
        if (!sn || !*sn || sn[0] == '.' || strchr(sn, '/') || !me_utf8_valid(sn)) {
            rc = me_error(d, ME_EINVAL, "%s: weight_map: tensor '%s' names shard '%s', not a file name beside the index",
                          file, e->string ? e->string : "", sn ? sn : "(not a string)");
            break;
        }
        if (me_strmap_get(&shards, sn) >= 0) continue;
        if (me_strmap_put(&shards, sn, 1) < 0) {
            rc = me_error(d, ME_ENOMEM, "%s: out of memory", file);
            break;
        }
        snprintf(shard, sizeof(shard), "%s/%s", dir, sn);
        struct stat st;
        if (stat(shard, &st) < 0) {
            rc = me_error(d, ME_EINVAL, "%s: weight_map names shard '%s', which is missing", file, sn);
            break;
        }
        int before = c->n_tensors;
        if ((rc = st_read_file(c, shard, d)) < 0) break;
        for (int i = before; i < c->n_tensors && rc == 0; i++) {
            if (me_strmap_get(&names, c->tensors[i].name) >= 0)
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s' is in two shards (the second: %s)", file, c->tensors[i].name, sn);
            else if (me_strmap_put(&names, c->tensors[i].name, i) < 0)
                rc = me_error(d, ME_ENOMEM, "%s: out of memory", file);
        }
    }
    for (const cJSON *e = wm->child; e && rc == 0; e = e->next) {
        int ti = me_strmap_get(&names, e->string ? e->string : "");
        if (ti < 0)
            rc = me_error(d, ME_EINVAL, "%s: weight_map names tensor '%s' in shard '%s', which does not hold it",
                          file, e->string ? e->string : "", e->valuestring);
    }
    me_strmap_free(&shards);
    me_strmap_free(&names);
    cJSON_Delete(root);
    if (rc < 0) {
        for (int i = first; i < c->n_tensors; i++) me_free(c->tensors[i].name);
        c->n_tensors = first;
    }
    return rc;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

static int st_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder: its index when there is one, else every *.safetensors in name order. */
static int st_read_dir(MeLlmConfig *c, const char *dir, MeDiag *d)
{
    char file[2048];
    struct stat st;
    snprintf(file, sizeof(file), "%s/model.safetensors.index.json", dir);
    if (stat(file, &st) == 0) return st_read_index(c, file, d);
    DIR *dp = opendir(dir);
    if (!dp) return me_error(d, ME_EIO, "%s: cannot open the folder: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0, rc = 0;
    for (struct dirent *e; (e = readdir(dp)) && rc == 0;) {
        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".safetensors")) continue;
        if (me_grow(&names, &cap, n + 1, sizeof(char *)) < 0 || !(names[n] = me_strdup(e->d_name))) rc = ME_ENOMEM;
        else n++;
    }
    closedir(dp);
    if (rc < 0) rc = me_error(d, rc, "%s: out of memory", dir);
    else if (n == 0) rc = me_error(d, ME_EINVAL, "%s: no model.safetensors.index.json and no *.safetensors file", dir);
    if (n > 1) qsort(names, (size_t)n, sizeof(char *), st_name_cmp);
    MeStrMap seen = { 0 };
    for (int i = 0; i < n && rc == 0; i++) {
        snprintf(file, sizeof(file), "%s/%s", dir, names[i]);
        int before = c->n_tensors;
        rc = st_read_file(c, file, d);
        for (int k = before; k < c->n_tensors && rc == 0; k++) {
            if (me_strmap_get(&seen, c->tensors[k].name) >= 0)
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s' is in two files", file, c->tensors[k].name);
            else if (me_strmap_put(&seen, c->tensors[k].name, k) < 0)
                rc = me_error(d, ME_ENOMEM, "%s: out of memory", file);
        }
    }
    me_strmap_free(&seen);
    for (int i = 0; i < n; i++) me_free(names[i]);
    me_free(names);
    return rc;
}

/* The tensor named prefix+suffix, or NULL. */
static MeLlmTensor *st_sibling(MeLlmConfig *c, const MeStrMap *m, const char *name, size_t keep, const char *suffix)
{
    char key[1024];
    if (keep + strlen(suffix) >= sizeof(key)) return NULL;
    memcpy(key, name, keep);
    strcpy(key + keep, suffix);
    int i = me_strmap_get(m, key);
    return i >= 0 ? &c->tensors[i] : NULL;
}

static int st_set_quant(MeLlmConfig *c, MeLlmQuant q, const char *tensor, MeDiag *d)
{
    if (c->quant == ME_LLM_Q_NONE || c->quant == q) {
        c->quant = q;
        return 0;
    }
    return me_error(d, ME_EINVAL, "%s: tensor '%s' is stored as %s, but the model is %s", c->path, tensor,
                    me_llm_quant_name(q), me_llm_quant_name(c->quant));
}

/* Logical parameters of each tensor, the quantization found, and the
 * compute dtype when the config did not say it. */
int me_llm_classify_tensors(MeLlmConfig *c, MeDiag *d)
{
    MeStrMap m = { 0 };
    int rc = 0;
    for (int i = 0; i < c->n_tensors; i++)
        if (me_strmap_put(&m, c->tensors[i].name, i) < 0) {
            me_strmap_free(&m);
            return me_error(d, ME_ENOMEM, "%s: out of memory", c->path);
        }
    bool *aux = me_calloc((size_t)c->n_tensors + 1, 1);
    if (!aux) {
        me_strmap_free(&m);
        return me_error(d, ME_ENOMEM, "%s: out of memory", c->path);
    }
    for (int i = 0; i < c->n_tensors && rc == 0; i++) {
        MeLlmTensor *t = &c->tensors[i];
        size_t nl = strlen(t->name);
        if (ends_with(t->name, ".qweight")) {
            size_t k = nl - strlen("qweight");
            MeLlmTensor *sc = st_sibling(c, &m, t->name, k, "scales"), *qz = st_sibling(c, &m, t->name, k, "qzeros");
            MeLlmTensor *gi = st_sibling(c, &m, t->name, k, "g_idx");
            if (!sc || !qz || t->dtype != ME_DT_I32 || qz->dtype != ME_DT_I32 || t->shape.rank != 2 ||
                sc->shape.rank != 2 || qz->shape.rank != 2 || sc->shape.d[1] == 0 || sc->shape.d[0] == 0) {
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s': a packed int32 qweight needs 2-d int32 qzeros and "
                              "scales beside it (GPTQ/AWQ)", c->path, t->name);
                break;
            }
            int64_t out = sc->shape.d[1], groups = sc->shape.d[0];
            int64_t bits32 = 32 * qz->shape.d[1]; /* = out * bits */
            int64_t bits = bits32 / out, in;
            MeLlmQuant q;
            if (bits32 % out || bits < 1 || bits > 8) {
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s': qzeros [%lld, %lld] and scales [%lld, %lld] give no whole "
                              "bit width", c->path, qz->name, (long long)qz->shape.d[0], (long long)qz->shape.d[1],
                              (long long)groups, (long long)out);
                break;
            }
            if (t->shape.d[1] == out && (t->shape.d[0] * 32) % bits == 0) { /* GPTQ: packed along in */
                q = ME_LLM_Q_GPTQ;
                in = t->shape.d[0] * 32 / bits;
            } else if (t->shape.d[1] == qz->shape.d[1]) { /* AWQ: packed along out */
                q = ME_LLM_Q_AWQ;
                in = t->shape.d[0];
            } else {
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s' of shape [%lld, %lld] is neither GPTQ's [in*bits/32, out] "
                              "nor AWQ's [in, out*bits/32] for %lld bits, %lld outputs", c->path, t->name,
                              (long long)t->shape.d[0], (long long)t->shape.d[1], (long long)bits, (long long)out);
                break;
            }
            if (in % groups || (gi && me_shape_numel(&gi->shape) != in)) {
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s': %lld inputs do not split into %lld groups%s", c->path,
                              t->name, (long long)in, (long long)groups, gi ? " or disagree with g_idx" : "");
                break;
            }
            t->params = me_smul((uint64_t)in, (uint64_t)out);
            c->quant_bits = (int)bits;
            c->quant_group = (int)(in / groups);
            aux[sc - c->tensors] = aux[qz - c->tensors] = true;
            if (gi) aux[gi - c->tensors] = true;
            rc = st_set_quant(c, q, t->name, d);
        } else if (ends_with(t->name, ".SCB")) {
            size_t k = nl - strlen("SCB");
            MeLlmTensor *w = st_sibling(c, &m, t->name, k, "weight"), *wf = st_sibling(c, &m, t->name, k, "weight_format");
            if (!w || w->dtype != ME_DT_I8) {
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s': bitsandbytes row scales without an int8 weight beside them",
                              c->path, t->name);
                break;
            }
            aux[i] = true;
            if (wf) aux[wf - c->tensors] = true;
            c->quant_bits = 8;
            rc = st_set_quant(c, ME_LLM_Q_INT8, t->name, d);
        } else if (ends_with(t->name, ".weight.absmax") && !ends_with(t->name, ".nested_absmax")) {
            size_t k = nl - strlen(".absmax");
            MeLlmTensor *w = st_sibling(c, &m, t->name, k, "");
            if (!w || w->dtype != ME_DT_U8) {
                rc = me_error(d, ME_EINVAL, "%s: tensor '%s': 4-bit absmax without a packed uint8 weight beside it",
                              c->path, t->name);
                break;
            }
            /* two 4-bit values a byte; the exact shape is in the quant_state
             * blob (data, not header), so an odd count would read one high */
            w->params = me_smul(w->bytes, 2);
            uint64_t blocks = (uint64_t)me_shape_numel(&t->shape);
            if (blocks && w->params % blocks == 0) c->quant_group = (int)(w->params / blocks);
            c->quant_bits = 4;
            static const char *const st4[] = { ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
                                               ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4" };
            for (size_t s = 0; s < sizeof(st4) / sizeof(st4[0]); s++) {
                MeLlmTensor *x = st_sibling(c, &m, w->name, strlen(w->name), st4[s]);
                if (x) aux[x - c->tensors] = true;
            }
            rc = st_set_quant(c, ME_LLM_Q_NF4, t->name, d);
        } else if (t->dtype == ME_DT_F8E4M3FN || t->dtype == ME_DT_F8E5M2) {
            static const char *const s8[] = { "_scale", "_scale_inv" };
            bool scaled = false;
            for (size_t s = 0; s < 2; s++) {
                MeLlmTensor *x = st_sibling(c, &m, t->name, nl, s8[s]);
                if (x) aux[x - c->tensors] = scaled = true;
            }
            if (ends_with(t->name, ".weight")) {
                MeLlmTensor *x = st_sibling(c, &m, t->name, nl - strlen("weight"), "input_scale");
                if (x) aux[x - c->tensors] = true;
            }
            c->quant_bits = 8;
            if (scaled) rc = st_set_quant(c, ME_LLM_Q_FP8, t->name, d);
        }
    }
    /* compute dtype: the float dtype holding most unquantized bytes */
    uint64_t by[ME_DT_COUNT] = { 0 };
    for (int i = 0; i < c->n_tensors; i++) {
        if (aux[i]) c->tensors[i].params = 0;
        else if (me_dtype_is_float(c->tensors[i].dtype) && c->tensors[i].dtype != ME_DT_F8E4M3FN &&
                 c->tensors[i].dtype != ME_DT_F8E5M2)
            by[c->tensors[i].dtype] = me_sadd(by[c->tensors[i].dtype], c->tensors[i].bytes);
    }
    if (rc == 0 && c->dtype == ME_DT_UNDEF) {
        int best = ME_DT_UNDEF;
        for (int t = 0; t < ME_DT_COUNT; t++)
            if (by[t] > by[best]) best = t;
        c->dtype = (MeDType)best;
    }
    if (c->quant == ME_LLM_Q_NONE) c->quant_bits = 0;
    me_free(aux);
    me_strmap_free(&m);
    return rc;
}

void me_llm_tensor_totals(const MeLlmConfig *c, uint64_t *params, uint64_t *bytes)
{
    uint64_t p = 0, b = 0;
    for (int i = 0; i < c->n_tensors; i++) {
        p = me_sadd(p, c->tensors[i].params);
        b = me_sadd(b, c->tensors[i].bytes);
    }
    *params = p;
    *bytes = b;
}

bool me_llm_has_weights(const char *dir)
{
    char file[2048];
    struct stat st;
    snprintf(file, sizeof(file), "%s/model.safetensors.index.json", dir);
    if (stat(file, &st) == 0) return true;
    DIR *dp = opendir(dir);
    bool yes = false;
    for (struct dirent *e; dp && !yes && (e = readdir(dp));)
        yes = e->d_name[0] != '.' && ends_with(e->d_name, ".safetensors");
    if (dp) closedir(dp);
    return yes;
}

int me_llm_check_weights(const MeLlmConfig *c, uint64_t layout_params, MeDiag *d)
{
    uint64_t p, b;
    me_llm_tensor_totals(c, &p, &b);
    if (p == layout_params) return 0;
    return me_error(d, ME_EINVAL, "%s: the config describes %llu parameters but the safetensors headers hold %llu%s: "
                    "config and weights are not of one model", c->path, (unsigned long long)layout_params,
                    (unsigned long long)p, c->quant ? " (quantized tensors counted unquantized)" : "");
}

int me_llm_read_weights(const char *path, MeLlmConfig *c, MeDiag *d)
{
    struct stat st;
    if (stat(path, &st) < 0) return me_error(d, ME_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (!c->path[0]) snprintf(c->path, sizeof(c->path), "%s", path);
    int rc, first = c->n_tensors;
    if (S_ISDIR(st.st_mode)) rc = st_read_dir(c, path, d);
    else if (ends_with(path, ".gguf")) { /* its tensors carry their logical shapes: nothing to classify */
        rc = me_gguf_read(c, path, d);
        return rc < 0 ? rc : c->n_tensors ? 0 : me_error(d, ME_EINVAL, "%s: holds no tensor", path);
    } else if (ends_with(path, ".index.json")) rc = st_read_index(c, path, d);
    else rc = st_read_file(c, path, d);
    if (rc == 0 && c->n_tensors == 0) rc = me_error(d, ME_EINVAL, "%s: holds no tensor", path);
    if (rc == 0) rc = me_llm_classify_tensors(c, d);
    if (rc < 0) { /* c as it was */
        for (int i = first; i < c->n_tensors; i++) me_free(c->tensors[i].name);
        c->n_tensors = first;
    }
    return rc < 0 ? rc : 0;
}
