/* ONNX loader. The file is never read whole: ModelProto, GraphProto and
 * TensorProto (initializers) are walked at the wire level through a small
 * pread window, so weight bytes (raw_data, float_data, ...) are skipped by
 * offset and never read, copied or mapped (a memory map would not do: the
 * kernel maps whole page-cache folios around every header touched, and
 * memory use would grow with weight size). The small messages (NodeProto,
 * ValueInfoProto, OperatorSetIdProto) are read and unpacked with the
 * protobuf-c code generated from Debian's onnx.proto. An initializer's
 * contents are read later, and only when shape inference asks for them (a
 * Reshape target, say). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "load/load.h"
#include "load/onnx_torch.h"
#include "ops/ops.h"
#include "onnx.pb-c.h"

#define ME_ONNX_MAX_OPSET 23

/* A window over the file: the only way bytes are read. A model loaded from
 * memory (memest_model_load_memory) has the caller's bytes instead, all of
 * them in the window, for the duration of the load only. */
typedef struct Reader {
    int fd;          /* -1: from memory */
    const uint8_t *mem; /* the caller's bytes while loading from memory, else NULL */
    uint64_t size;
    uint8_t *buf;
    uint64_t woff;   /* file offset of buf[0] */
    size_t wlen;     /* valid bytes in buf */
} Reader;

#define RD_WINDOW 65536

static void reader_free(void *p)
{
    Reader *r = p;
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    me_free(r->buf);
    me_free(r);
}

/* Reads len bytes at off into dst; -1 on a short read. */
static int rd_copy(Reader *r, uint64_t off, size_t len, uint8_t *dst)
{
    if (off > r->size || len > r->size - off) return -1;
    if (r->fd < 0) {
        if (!r->mem) return -1; /* loaded from memory, which is gone */
        memcpy(dst, r->mem + off, len);
        return 0;
    }
    while (len) {
        ssize_t n = pread(r->fd, dst, len, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        dst += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

/* Up to RD_WINDOW bytes at off through the window; NULL past the end. */
static const uint8_t *rd_peek(Reader *r, uint64_t off, size_t len)
{
    if (off > r->size || len > r->size - off || len > RD_WINDOW) return NULL;
    if (r->mem) return r->mem + off;
    if (off >= r->woff && off + len <= r->woff + r->wlen) return r->buf + (off - r->woff);
    size_t want = r->size - off < RD_WINDOW ? (size_t)(r->size - off) : RD_WINDOW;
    if (rd_copy(r, off, want, r->buf) < 0) return NULL;
    r->woff = off;
    r->wlen = want;
    return r->buf;
}

/* --- protobuf wire format --- */

typedef struct PbField {
    uint32_t num;
    int wt;            /* 0 varint, 1 fixed64, 2 bytes, 5 fixed32 */
    uint64_t v;        /* varint / fixed value */
    uint64_t off;      /* wt 2: payload offset in the file */
    uint64_t len;
} PbField;

static int pb_varint(const uint8_t **cur, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*cur >= end) return -1;
        uint8_t b = *(*cur)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *out = v; return 0; }
    }
    return -1;
}

/* Next field of the message [*cur, end): 1 read, 0 end, -1 malformed. */
static int pb_next(Reader *r, uint64_t *cur, uint64_t end, PbField *f)
{
    if (*cur >= end) return 0;
    size_t avail = end - *cur < 20 ? (size_t)(end - *cur) : 20; /* tag + length: at most 20 bytes */
    const uint8_t *h = rd_peek(r, *cur, avail), *p = h;
    if (!h) return -1;
    uint64_t tag;
    if (pb_varint(&p, h + avail, &tag) < 0 || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return -1;
    f->num = (uint32_t)(tag >> 3);
    f->wt = (int)(tag & 7);
    switch (f->wt) {
    case 0:
        if (pb_varint(&p, h + avail, &f->v) < 0) return -1;
        *cur += (uint64_t)(p - h);
        return 1;
    case 1:
    case 5: {
        size_t n = f->wt == 1 ? 8 : 4;
        if ((size_t)(h + avail - p) < n) return -1;
        uint64_t v = 0;
        memcpy(&v, p, n);
        f->v = v;
        *cur += (uint64_t)(p - h) + n;
        return 1;
    }
    case 2:
        if (pb_varint(&p, h + avail, &f->len) < 0) return -1;
        f->off = *cur + (uint64_t)(p - h);
        if (f->len > end - f->off) return -1;
        *cur = f->off + f->len;
        return 1;
    default: return -1; /* groups are not used by ONNX */
    }
}

typedef struct OCtx {
    MeGraph *g;
    MeDiag *d;
    Reader *r;
    bool threads;    /* a helper thread may prefault a big graph's arrays */
    int *gen, ngen, cap_gen; /* nodes whose name memest made up (unnamed in the file) */
    struct Func *fn;         /* the model's local functions (FunctionProto) */
    int nfn;
    int *subw, nsubw, cap_subw; /* graph inputs a subgraph body reads in a weight slot (capture_names) */
    int *cap_mark, cap_mark_n;  /* value -> the node (+1) whose captures hold it: one lookup, not a scan */
    /* a torch.export-based export (onnx_torch.h): node -> the name
     * TorchScript's exporter would have given it, NULL where the file's
     * name is that (or there is no metadata); the graph signature */
    MeTorchScopes ts;
    char **scoped;
    int cap_scoped;
    char *signature;
} OCtx;

/* A model-local function (ModelProto.functions): nodes calling it by
 * domain and name are replaced by its body, inlined. */
typedef struct Func {
    char *name, *domain;
    char **in, **out;
    int n_in, n_out;
    PbField *nodes;       /* its NodeProtos, in the file */
    int n_nodes;
    Onnx__AttributeProto **defaults; /* attribute_proto: defaults for ref_attr_name */
    int n_defaults;
} Func;

/* One call being inlined: formal inputs and outputs are the call's
 * values, other names get the call's prefix, attribute references
 * (ref_attr_name) read the call's attributes. */
typedef struct Call {
    const Func *fn;
    const struct Call *parent;
    int *in, *out;
    int n_in, n_out;
    Onnx__AttributeProto *attrs; /* shallow copies, names as the call gives them */
    int n_attrs;
    const char *prefix;  /* the call node's full name */
    int depth;
} Call;

#define ME_MAX_CALL_DEPTH 16 /* nested function calls (a recursive function never ends) */

static int bad(OCtx *o, const char *what)
{
    return me_error(o->d, ME_EINVAL, "%s: not a valid ONNX file: %s (truncated or corrupt protobuf)", o->g->path, what);
}

/* A whole (small) message for protobuf-c: a pointer into the read window
 * when it fits (nodes are read in file order, so the window serves most of
 * them), else a copy in *buf (to free). */
static int read_message(OCtx *o, const PbField *f, const uint8_t **data, uint8_t **buf)
{
    *buf = NULL;
    if (f->len <= RD_WINDOW && (*data = rd_peek(o->r, f->off, (size_t)f->len))) return 0;
    *buf = me_malloc((size_t)f->len + 1);
    if (!*buf) return ME_ENOMEM;
    if (rd_copy(o->r, f->off, (size_t)f->len, *buf) < 0) {
        me_free(*buf);
        *buf = NULL;
        return me_error(o->d, ME_EIO, "%s: read error", o->g->path);
    }
    *data = *buf;
    return 0;
}

/* --- initializers: wire-level TensorProto, data located but not read --- */

enum { ENC_NONE = 0, ENC_RAW, ENC_FLOAT, ENC_DOUBLE, ENC_VARINT, ENC_UVARINT };

/* Element types whose contents shape inference may read (shapes, axes,
 * scales): whole bytes, int or float32/64. Half, 8-bit float, 4-bit,
 * complex and string tensors are never shapes. */
static bool decodable(MeDType t)
{
    return t == ME_DT_F32 || t == ME_DT_F64 || t == ME_DT_BOOL || (t >= ME_DT_U8 && t <= ME_DT_I64 && t != ME_DT_STRING) ||
           t == ME_DT_U32 || t == ME_DT_U64;
}

static int decode_tensor(MeGraph *g, int vi, MeDiag *d)
{
    Reader *r = g->loader;
    MeValue *v = &g->v[vi];
    int64_t n = me_shape_numel(&v->shape);
    if (!r || v->mat_enc == ENC_NONE || n < 0 || n > ME_MAX_FOLD || v->mat_len > 10 * ME_MAX_FOLD) return 0;
    if (!decodable(v->dtype)) return 0; /* never needed to compute shapes */
    uint8_t *data = me_malloc((size_t)v->mat_len + 1);
    if (!data) return ME_ENOMEM;
    if (rd_copy(r, (uint64_t)v->mat_off, (size_t)v->mat_len, data) < 0) {
        me_free(data);
        return me_error(d, ME_EIO, "%s: initializer '%s': cannot read its data", g->path, v->name);
    }
    const uint8_t *p = data, *end = data + v->mat_len;
    int64_t *iv = NULL;
    double *fv = NULL;
    bool is_float = me_dtype_is_float(v->dtype);
    if (is_float) fv = me_malloc(sizeof(double) * (size_t)(n ? n : 1));
    else iv = me_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!fv && !iv) { me_free(data); return ME_ENOMEM; }
    int64_t k = 0;
    int rc = 0;
    int es = me_dtype_size(v->dtype);
    for (; k < n; k++) {
        uint64_t u = 0;
        if (v->mat_enc == ENC_RAW) {
            if (end - p < es) break;
            uint8_t b[8] = { 0 };
            memcpy(b, p, (size_t)es);
            p += es;
            if (v->dtype == ME_DT_F32) { float f; memcpy(&f, b, 4); fv[k] = f; continue; }
            if (v->dtype == ME_DT_F64) { double f; memcpy(&f, b, 8); fv[k] = f; continue; }
            memcpy(&u, b, 8);
            switch (v->dtype) { /* sign-extend */
            case ME_DT_I8: iv[k] = (int8_t)u; break;
            case ME_DT_I16: iv[k] = (int16_t)u; break;
            case ME_DT_I32: iv[k] = (int32_t)u; break;
            default: iv[k] = (int64_t)u; break;
            }
        } else if (v->mat_enc == ENC_FLOAT) {
            if (end - p < 4) break;
            float f;
            memcpy(&f, p, 4);
            p += 4;
            if (fv) fv[k] = f; else iv[k] = (int64_t)f;
        } else if (v->mat_enc == ENC_DOUBLE) {
            if (end - p < 8) break;
            double f;
            memcpy(&f, p, 8);
            p += 8;
            if (fv) fv[k] = f; else iv[k] = (int64_t)f;
        } else {
            if (pb_varint(&p, end, &u) < 0) break;
            int64_t s = v->dtype == ME_DT_I32 || v->dtype == ME_DT_I16 || v->dtype == ME_DT_I8 ? (int32_t)u : (int64_t)u;
            if (fv) fv[k] = (double)s; else iv[k] = s;
        }
    }
    if (k < n) rc = me_error(d, ME_EINVAL, "%s: initializer '%s': its data holds fewer than the %lld elements its shape needs",
                             g->path, v->name, (long long)n);
    else if (fv) rc = me_value_set_floats(v, fv, n);
    else rc = me_value_set_ints(v, iv, n);
    me_free(fv);
    me_free(iv);
    me_free(data);
    return rc;
}

static int scan_dims(OCtx *o, const PbField *f, MeShape *s, const char *what)
{
    if (f->wt == 0) {
        if (s->rank >= ME_MAX_RANK) return me_error(o->d, ME_EINVAL, "%s: %s: rank above %d", o->g->path, what, ME_MAX_RANK);
        s->d[s->rank++] = (int64_t)f->v;
        return 0;
    }
    if (f->wt != 2) return bad(o, "dims field");
    if (f->len > 10 * ME_MAX_RANK) return me_error(o->d, ME_EINVAL, "%s: %s: rank above %d", o->g->path, what, ME_MAX_RANK);
    const uint8_t *p = rd_peek(o->r, f->off, (size_t)f->len), *end = p + f->len;
    if (!p) return bad(o, "dims field");
    while (p < end) {
        uint64_t v;
        if (pb_varint(&p, end, &v) < 0) return bad(o, "packed dims");
        if (s->rank >= ME_MAX_RANK) return me_error(o->d, ME_EINVAL, "%s: %s: rank above %d", o->g->path, what, ME_MAX_RANK);
        s->d[s->rank++] = (int64_t)v;
    }
    return 0;
}

static int load_initializer(OCtx *o, uint64_t off, uint64_t len, int index)
{
    uint64_t cur = off, end = off + len;
    PbField f = { 0 };
    MeShape s = { 0 };
    int64_t dtype = 0, location = 0;
    uint64_t name_off = 0, name_len = 0;
    int enc = ENC_NONE, r;
    uint64_t data_off = 0, data_len = 0;
    bool has_ext = false;
    char what[64];
    snprintf(what, sizeof(what), "initializer %d", index);
    while ((r = pb_next(o->r, &cur, end, &f)) > 0) {
        switch (f.num) {
        case 1: if ((r = scan_dims(o, &f, &s, what)) < 0) return r; break;
        case 2: dtype = (int64_t)f.v; break;
        case 8: if (f.wt == 2) { name_off = f.off; name_len = f.len; } break;
        case 9: if (f.wt == 2) { enc = ENC_RAW; data_off = f.off; data_len = f.len; } break;
        case 4: if (f.wt == 2) { enc = ENC_FLOAT; data_off = f.off; data_len = f.len; } break;
        case 10: if (f.wt == 2) { enc = ENC_DOUBLE; data_off = f.off; data_len = f.len; } break;
        case 5: case 7: if (f.wt == 2) { enc = ENC_VARINT; data_off = f.off; data_len = f.len; } break;
        case 11: if (f.wt == 2) { enc = ENC_UVARINT; data_off = f.off; data_len = f.len; } break;
        case 13: has_ext = true; break;
        case 14: location = (int64_t)f.v; break;
        default: break;
        }
    }
    if (r < 0) return bad(o, what);
    const uint8_t *name = name_len && name_len <= ME_MAX_NAME ? rd_peek(o->r, name_off, (size_t)name_len) : NULL;
    if (!name || memchr(name, 0, (size_t)name_len))
        return me_error(o->d, ME_EINVAL, "%s: %s has no usable name", o->g->path, what);
    char *nm = me_strndup((const char *)name, (size_t)name_len);
    if (!nm) return ME_ENOMEM;
    if (!me_utf8_valid(nm)) {
        me_free(nm);
        return me_error(o->d, ME_EINVAL, "%s: %s: its name is not valid UTF-8", o->g->path, what);
    }
    if (dtype <= 0 || dtype >= ME_DT_COUNT) {
        int rc = me_error(o->d, ME_EINVAL, "%s: initializer '%s': data_type %lld is not a known type", o->g->path, nm, (long long)dtype);
        me_free(nm);
        return rc;
    }
    for (int i = 0; i < s.rank; i++)
        if (s.d[i] < 0 || s.d[i] > ME_MAX_DIM) {
            int rc = me_error(o->d, ME_EINVAL, "%s: initializer '%s': dim %d is %lld", o->g->path, nm, i, (long long)s.d[i]);
            me_free(nm);
            return rc;
        }
    int64_t numel = me_shape_numel(&s);
    int es = me_dtype_size((MeDType)dtype);
    if (numel < 0 || (es && numel > INT64_MAX / es)) {
        int rc = me_error(o->d, ME_EINVAL, "%s: initializer '%s': shape has too many elements", o->g->path, nm);
        me_free(nm);
        return rc;
    }
    if (enc == ENC_RAW && !has_ext && location != 1 && es && data_len != me_dtype_bytes((MeDType)dtype, numel)) {
        int rc = me_error(o->d, ME_EINVAL, "%s: initializer '%s': raw_data has %llu bytes, its shape needs %llu",
                          o->g->path, nm, (unsigned long long)data_len, (unsigned long long)me_dtype_bytes((MeDType)dtype, numel));
        me_free(nm);
        return rc;
    }
    if (me_graph_find(o->g, nm) >= 0) {
        int rc = me_error(o->d, ME_EINVAL, "%s: initializer '%s' is defined twice", o->g->path, nm);
        me_free(nm);
        return rc;
    }
    int vi, rc = me_graph_value(o->g, nm, &vi);
    me_free(nm);
    if (rc < 0) return rc;
    MeValue *v = &o->g->v[vi];
    v->kind = ME_V_INIT;
    v->dtype = (MeDType)dtype;
    v->shape = s;
    v->known = true;
    v->data_external = has_ext || location == 1;
    if (!v->data_external && enc != ENC_NONE) {
        v->materialize = decode_tensor;
        v->mat_enc = enc;
        v->mat_off = (int64_t)data_off;
        v->mat_len = (int64_t)data_len;
    } else if (!v->data_external && numel == 0) {
        v->has_val = true;
    }
    return 0;
}

/* The header of a TensorProto at the wire level: dims, data type, name. */
static int scan_tensor(OCtx *o, uint64_t off, uint64_t len, MeShape *s, int64_t *dtype, uint64_t *name_off, uint64_t *name_len, const char *what)
{
    uint64_t cur = off, end = off + len;
    PbField f = { 0 };
    int r;
    while ((r = pb_next(o->r, &cur, end, &f)) > 0) {
        if (f.num == 1 && (r = scan_dims(o, &f, s, what)) < 0) return r;
        if (f.num == 2 && f.wt == 0) *dtype = (int64_t)f.v;
        if (f.num == 8 && f.wt == 2) { *name_off = f.off; *name_len = f.len; }
    }
    return r < 0 ? bad(o, what) : 0;
}

/* A sparse initializer (SparseTensorProto: values [NNZ], indices [NNZ] or
 * [NNZ, rank], dense dims). Ops see its dense shape; what PyTorch holds
 * of a sparse COO tensor is its values and its indices, so its memory
 * and parameter count are those (MeValue.sparse). Data is never read. */
static int load_sparse_initializer(OCtx *o, const PbField *fld, int index)
{
    uint64_t cur = fld->off, end = fld->off + fld->len;
    PbField f = { 0 };
    MeShape dense = { 0 }, vs = { 0 }, is = { 0 };
    int64_t vt = 0, it = 0;
    uint64_t name_off = 0, name_len = 0, dummy_off = 0, dummy_len = 0;
    bool has_values = false, has_indices = false;
    char what[64];
    snprintf(what, sizeof(what), "sparse initializer %d", index);
    int r;
    while ((r = pb_next(o->r, &cur, end, &f)) > 0) {
        if (f.num == 1 && f.wt == 2) {
            has_values = true;
            if ((r = scan_tensor(o, f.off, f.len, &vs, &vt, &name_off, &name_len, what)) < 0) return r;
        } else if (f.num == 2 && f.wt == 2) {
            has_indices = true;
            if ((r = scan_tensor(o, f.off, f.len, &is, &it, &dummy_off, &dummy_len, what)) < 0) return r;
        } else if (f.num == 3 && (r = scan_dims(o, &f, &dense, what)) < 0) {
            return r;
        }
    }
    if (r < 0) return bad(o, what);
    const uint8_t *name = name_len && name_len <= ME_MAX_NAME ? rd_peek(o->r, name_off, (size_t)name_len) : NULL;
    if (!has_values || !has_indices || !name || memchr(name, 0, (size_t)name_len) || !me_utf8_valid_n((const char *)name, (size_t)name_len))
        return me_error(o->d, ME_EINVAL, "%s: %s needs values (with a UTF-8 name) and indices", o->g->path, what);
    int nl = (int)name_len;
    if (vt <= 0 || vt >= ME_DT_COUNT || it != ME_DT_I64)
        return me_error(o->d, ME_EINVAL, "%s: sparse initializer '%.*s': values of data_type %lld, indices of %lld (int64 needed)",
                        o->g->path, nl, name, (long long)vt, (long long)it);
    int64_t nnz = vs.rank == 1 ? vs.d[0] : -1, in = me_shape_numel(&is), dn = me_shape_numel(&dense);
    bool ok = nnz >= 0 && in >= 0 && dn >= 0 && nnz <= dn && (is.rank == 1 || is.rank == 2) && is.d[0] == nnz &&
              (is.rank == 1 || is.d[1] == dense.rank);
    for (int k = 0; k < dense.rank; k++) ok = ok && dense.d[k] >= 0 && dense.d[k] <= ME_MAX_DIM;
    if (!ok)
        return me_error(o->d, ME_EINVAL, "%s: sparse initializer '%.*s': values, indices and dims do not agree (values [NNZ], indices [NNZ] or [NNZ, rank])",
                        o->g->path, nl, name);
    if (me_strmap_get_n(&o->g->names, (const char *)name, (size_t)name_len) >= 0)
        return me_error(o->d, ME_EINVAL, "%s: initializer '%.*s' is defined twice", o->g->path, nl, name);
    int vi, rc = me_graph_value_n(o->g, (const char *)name, (size_t)name_len, &vi);
    if (rc < 0) return rc;
    MeValue *v = &o->g->v[vi];
    v->kind = ME_V_INIT;
    v->dtype = (MeDType)vt;
    v->shape = dense;
    v->known = true;
    v->sparse = true;
    v->nnz = nnz;
    return 0;
}

/* --- attributes and Constant tensors (already unpacked by protobuf-c) --- */

static int tensor_from_proto(OCtx *o, const Onnx__TensorProto *t, const char *base, int *vi)
{
    MeShape s = { .rank = (int)t->n_dims };
    if (t->n_dims > ME_MAX_RANK) return me_error(o->d, ME_EINVAL, "%s: tensor '%s': rank %zu above %d", o->g->path, base, t->n_dims, ME_MAX_RANK);
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > ME_MAX_DIM)
            return me_error(o->d, ME_EINVAL, "%s: tensor '%s': dim %zu is %lld", o->g->path, base, i, (long long)t->dims[i]);
        s.d[i] = t->dims[i];
    }
    if (!t->has_data_type || t->data_type <= 0 || t->data_type >= ME_DT_COUNT)
        return me_error(o->d, ME_EINVAL, "%s: tensor '%s': unknown data_type", o->g->path, base);
    int rc = me_graph_new_value(o->g, base, vi);
    if (rc < 0) return rc;
    MeValue *v = &o->g->v[*vi];
    v->kind = ME_V_CONST;
    v->dtype = (MeDType)t->data_type;
    v->shape = s;
    v->known = true;
    int64_t n = me_shape_numel(&s);
    if (n < 0 || n > ME_MAX_FOLD) return 0;
    int es = me_dtype_size(v->dtype);
    if (!decodable(v->dtype)) return 0; /* never a shape: its size is what counts */
    if (t->has_raw_data) {
        if (!es || (int64_t)t->raw_data.len != n * es) return 0;
        int64_t iv[64];
        double fv[64];
        if (n > 64) return 0; /* big constants are never shapes */
        for (int64_t k = 0; k < n; k++) {
            const uint8_t *p = t->raw_data.data + k * es;
            uint8_t b[8] = { 0 };
            memcpy(b, p, (size_t)es);
            uint64_t u;
            memcpy(&u, b, 8);
            switch (v->dtype) {
            case ME_DT_F32: { float f; memcpy(&f, b, 4); fv[k] = f; break; }
            case ME_DT_F64: { memcpy(&fv[k], b, 8); break; }
            case ME_DT_I8: iv[k] = (int8_t)u; break;
            case ME_DT_I16: iv[k] = (int16_t)u; break;
            case ME_DT_I32: iv[k] = (int32_t)u; break;
            case ME_DT_F16: case ME_DT_BF16: return 0;
            default: iv[k] = (int64_t)u; break;
            }
        }
        return me_dtype_is_float(v->dtype) ? me_value_set_floats(v, fv, n) : me_value_set_ints(v, iv, n);
    }
    if ((int64_t)t->n_int64_data == n) return me_value_set_ints(v, t->int64_data, n);
    if ((int64_t)t->n_int32_data == n && !me_dtype_is_float(v->dtype)) {
        int64_t *iv = me_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        if (!iv) return ME_ENOMEM;
        for (int64_t k = 0; k < n; k++) iv[k] = t->int32_data[k];
        rc = me_value_set_ints(v, iv, n);
        me_free(iv);
        return rc;
    }
    if ((int64_t)t->n_float_data == n || (int64_t)t->n_double_data == n) {
        double *fv = me_malloc(sizeof(double) * (size_t)(n ? n : 1));
        if (!fv) return ME_ENOMEM;
        for (int64_t k = 0; k < n; k++) fv[k] = t->n_float_data ? t->float_data[k] : t->double_data[k];
        rc = me_value_set_floats(v, fv, n);
        me_free(fv);
        return rc;
    }
    return 0;
}

static int convert_attr(OCtx *o, MeNode *n, const Onnx__AttributeProto *a)
{
    if (!a->name || strlen(a->name) > ME_MAX_NAME)
        return me_error(o->d, ME_EINVAL, "%s: node '%s' (%s): an attribute has no name, or one over %d bytes", o->g->path, n->name, n->op, ME_MAX_NAME);
    MeAttr *m;
    switch (a->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        if (!(m = me_node_add_attr(n, a->name, ME_A_INT))) return ME_ENOMEM;
        m->i = a->i;
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        if (!(m = me_node_add_attr(n, a->name, ME_A_FLOAT))) return ME_ENOMEM;
        m->f = a->f;
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        if (!(m = me_node_add_attr(n, a->name, ME_A_STRING))) return ME_ENOMEM;
        if (!(m->s = me_strndup((const char *)a->s.data, a->s.len))) return ME_ENOMEM;
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        if (!(m = me_node_add_attr(n, a->name, ME_A_INTS))) return ME_ENOMEM;
        if (a->n_ints > 1u << 20) return me_error(o->d, ME_EINVAL, "%s: node '%s': attribute '%s' has %zu values", o->g->path, n->name, a->name, a->n_ints);
        if (!(m->ints = me_malloc(sizeof(int64_t) * (a->n_ints ? a->n_ints : 1)))) return ME_ENOMEM;
        if (a->n_ints) memcpy(m->ints, a->ints, sizeof(int64_t) * a->n_ints);
        m->n = (int)a->n_ints;
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        if (!(m = me_node_add_attr(n, a->name, ME_A_FLOATS))) return ME_ENOMEM;
        if (a->n_floats > 1u << 20) return me_error(o->d, ME_EINVAL, "%s: node '%s': attribute '%s' has %zu values", o->g->path, n->name, a->name, a->n_floats);
        if (!(m->floats = me_malloc(sizeof(double) * (a->n_floats ? a->n_floats : 1)))) return ME_ENOMEM;
        for (size_t k = 0; k < a->n_floats; k++) m->floats[k] = a->floats[k];
        m->n = (int)a->n_floats;
        return 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!a->t) return me_error(o->d, ME_EINVAL, "%s: node '%s': attribute '%s' has no tensor", o->g->path, n->name, a->name);
        char base[2 * ME_MAX_NAME + 2];
        snprintf(base, sizeof(base), "%s/%s", n->name, a->name);
        int vi, rc = tensor_from_proto(o, a->t, base, &vi);
        if (rc < 0) return rc;
        if (!(m = me_node_add_attr(n, a->name, ME_A_TENSOR))) return ME_ENOMEM;
        m->tensor = vi;
        return 0;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: {
        /* a sparse Constant: its dense shape for the ops, values and
         * indices for memory (as a sparse initializer) */
        const Onnx__SparseTensorProto *sp = a->sparse_tensor;
        if (!sp || !sp->values || !sp->indices || sp->n_dims > ME_MAX_RANK || sp->values->n_dims != 1 ||
            (sp->indices->n_dims != 1 && sp->indices->n_dims != 2) || sp->indices->dims[0] != sp->values->dims[0] ||
            (sp->indices->n_dims == 2 && sp->indices->dims[1] != (int64_t)sp->n_dims))
            return me_error(o->d, ME_EINVAL, "%s: node '%s': attribute '%s': a sparse tensor needs values [NNZ], indices [NNZ] or [NNZ, rank] and dims",
                            o->g->path, n->name, a->name);
        Onnx__TensorProto dense = *sp->values;
        dense.n_dims = sp->n_dims;
        dense.dims = sp->dims;
        dense.has_raw_data = false;
        dense.n_float_data = dense.n_int32_data = dense.n_int64_data = dense.n_double_data = dense.n_uint64_data = 0;
        char base[2 * ME_MAX_NAME + 2];
        snprintf(base, sizeof(base), "%s/%s", n->name, a->name);
        int vi, rc = tensor_from_proto(o, &dense, base, &vi);
        if (rc < 0) return rc;
        MeValue *v = &o->g->v[vi];
        int64_t nnz = sp->values->dims[0], dn = me_shape_numel(&v->shape), in = 1;
        for (size_t k = 0; k < sp->indices->n_dims; k++) in = sp->indices->dims[k] >= 0 && me_mul64(in, sp->indices->dims[k], &in) ? in : -1;
        if (nnz < 0 || dn < 0 || nnz > dn || in < 0)
            return me_error(o->d, ME_EINVAL, "%s: node '%s': attribute '%s': a sparse tensor of %lld values in %lld elements",
                            o->g->path, n->name, a->name, (long long)nnz, (long long)dn);
        v->sparse = true;
        v->nnz = nnz;
        if (!(m = me_node_add_attr(n, "value", ME_A_TENSOR))) return ME_ENOMEM;
        m->tensor = vi;
        return 0;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
        /* Subgraphs (If/Loop/Scan) are kept as a marker; such nodes are
         * reported as unsupported rather than guessed. */
        if (!(m = me_node_add_attr(n, a->name, ME_A_GRAPH))) return ME_ENOMEM;
        return 0;
    default:
        if (!(m = me_node_add_attr(n, a->name, ME_A_OTHER))) return ME_ENOMEM;
        return 0;
    }
}

/* torch.onnx (>= 1.13) names nodes after their module scope,
 * "/layer1/layer1.0/conv1/Conv" or "/features/features.1/conv/conv.0/conv.0.0/Conv":
 * a segment that starts with the previous segment plus '.' names a child of
 * that container ("layer1.0" = layer1[0]); others are attribute names. The
 * last segment is the op (Conv, Relu_1) and is dropped. */
static char *module_name(MeGraph *g, const char *name)
{
    if (name[0] != '/' || !strchr(name + 1, '/')) return (char *)name; /* the node's own name, in the arena */
    size_t len = strlen(name);
    char *out = me_arena_alloc(&g->arena, len + 1);
    if (!out) return NULL;
    size_t o = 0;
    const char *seg = name + 1, *prev = NULL;
    size_t prev_len = 0;
    for (;;) {
        const char *slash = strchr(seg, '/');
        if (!slash) break;
        size_t sl = (size_t)(slash - seg);
        if (sl) {
            const char *add = seg;
            size_t add_len = sl;
            if (prev && sl > prev_len + 1 && !strncmp(seg, prev, prev_len) && seg[prev_len] == '.') {
                add = seg + prev_len + 1;
                add_len = sl - prev_len - 1;
            }
            if (o) out[o++] = '.';
            memcpy(out + o, add, add_len);
            o += add_len;
            prev = seg;
            prev_len = sl;
        }
        seg = slash + 1;
    }
    out[o] = 0;
    return o ? out : (char *)name;
}

/* A field of a message held in memory (NodeProto). */
typedef struct MemField {
    uint32_t num;
    int wt;
    uint64_t v;
    const uint8_t *p; /* wt 2: payload */
    size_t len;
} MemField;

static int mem_next(const uint8_t **cur, const uint8_t *end, MemField *f)
{
    if (*cur >= end) return 0;
    const uint8_t *p = *cur;
    uint64_t tag;
    if (pb_varint(&p, end, &tag) < 0 || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return -1;
    f->num = (uint32_t)(tag >> 3);
    f->wt = (int)(tag & 7);
    switch (f->wt) {
    case 0:
        if (pb_varint(&p, end, &f->v) < 0) return -1;
        break;
    case 1:
    case 5: {
        size_t n = f->wt == 1 ? 8 : 4;
        if ((size_t)(end - p) < n) return -1;
        uint64_t v = 0;
        memcpy(&v, p, n);
        f->v = v;
        p += n;
        break;
    }
    case 2:
        if (pb_varint(&p, end, &f->v) < 0 || f->v > (uint64_t)(end - p)) return -1;
        f->p = p;
        f->len = (size_t)f->v;
        p += f->len;
        break;
    default: return -1;
    }
    *cur = p;
    return 1;
}

/* protobuf-c unpacks nested messages recursively, so a hostile file of a few
 * hundred KB (a TypeProto of sequences of sequences..., a subgraph inside a
 * subgraph...) would overflow the stack. Before handing it a message, walk
 * its submessages to ME_MAX_PB_DEPTH with the generated descriptors; real
 * models nest under 20. 1: too deep; corrupt wire data is left to the
 * unpacker to report. */
#define ME_MAX_PB_DEPTH 64
static int pb_too_deep(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth)
{
    if (depth > ME_MAX_PB_DEPTH) return 1;
    const uint8_t *cur = p, *end = p + len;
    MemField f;
    while (mem_next(&cur, end, &f) > 0) {
        if (f.wt != 2) continue;
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(d, f.num);
        if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE && pb_too_deep(fd->descriptor, f.p, f.len, depth + 1)) return 1;
    }
    return 0;
}

/* A subgraph attribute (If/Loop/Scan bodies: AttributeProto.g = 6, .graphs
 * = 11) becomes a marker without being unpacked: memest does not analyze
 * subgraphs, and skipping them keeps their weights and their nesting out of
 * protobuf-c (the outer weights they read are found at the wire level,
 * capture_names). 1: handled; 0: not a subgraph attribute. */
static int graph_attr(OCtx *o, MeNode *n, const uint8_t *p, size_t len)
{
    const uint8_t *cur = p, *end = p + len;
    const uint8_t *name = NULL;
    size_t name_len = 0;
    int graph = 0;
    MemField f;
    while (mem_next(&cur, end, &f) > 0) {
        if (f.num == 1 && f.wt == 2) name = f.p, name_len = f.len;
        else if ((f.num == 6 || f.num == 11) && f.wt == 2) graph = 1;
    }
    if (!graph) return 0;
    if (!name || !name_len || name_len > ME_MAX_NAME || !me_utf8_valid_n((const char *)name, name_len))
        return me_error(o->d, ME_EINVAL, "%s: node '%s' (%s): a subgraph attribute has no valid name", o->g->path, n->name, n->op);
    char buf[ME_MAX_NAME + 1];
    memcpy(buf, name, name_len);
    buf[name_len] = 0;
    return me_node_add_attr(n, buf, ME_A_GRAPH) ? 1 : ME_ENOMEM;
}

/* The outer graph's stored tensors a subgraph attribute's nodes read
 * (AttributeProto g = 6, graphs = 11; GraphProto node = 1; NodeProto input
 * = 1, attribute = 5, nested subgraphs walked too): ONNX lets a body read
 * any value of an enclosing scope by name, and an exported `if` or `for`
 * reads its modules' weights so (torch.jit.script: Gemm(x, a.weight) inside
 * the If's branches). They become extra inputs of the node, so that the
 * weights are counted as parameters once, however many bodies read them.
 * Graph inputs a body reads become inputs of the node too (a file
 * without its weights lists them as inputs; a body reading one in a
 * weight slot is evidence for me_load_weight_inputs, OCtx.subw). Names a
 * body defines are never outer initializers or inputs (ONNX forbids
 * shadowing), so only those are looked up. Bodies nested deeper
 * than ME_MAX_PB_DEPTH are not walked (a hostile file of 10^5 nested Ifs
 * still loads, its If unknown). */
typedef struct Captures {
    int *v;
    int n, cap;
    int stamp; /* the capturing node's index + 1 (OCtx.cap_mark) */
} Captures;

/* The op a body's NodeProto runs (op_type 4, domain 7), as the registry has it; NULL if unknown. */
static const MeOpDesc *body_op(OCtx *o, const uint8_t *p, size_t len)
{
    const uint8_t *cur = p, *end = p + len;
    char op[128] = "", domain[128] = "";
    MemField f;
    while (mem_next(&cur, end, &f) > 0) {
        if (f.wt != 2 || (f.num != 4 && f.num != 7) || f.len >= sizeof(op) || memchr(f.p, 0, f.len)) continue;
        char *dst = f.num == 4 ? op : domain;
        memcpy(dst, f.p, f.len);
        dst[f.len] = 0;
    }
    return *op ? me_op_find(op, domain, o->g->opset) : NULL;
}

static int capture_names(OCtx *o, const MeNode *n, const uint8_t *p, size_t len, int depth, Captures *cp)
{
    if (depth > ME_MAX_PB_DEPTH) return 0; /* bodies nested deeper stay unread, as unanalysed as the rest of them */
    const uint8_t *cur = p, *end = p + len;
    MemField f;
    int r;
    while ((r = mem_next(&cur, end, &f)) > 0) {
        if (f.wt != 2 || !(f.num == 6 || f.num == 11)) continue;
        const uint8_t *gc = f.p, *ge = f.p + f.len; /* GraphProto */
        MemField gf = { 0 };
        while ((r = mem_next(&gc, ge, &gf)) > 0) {
            if (gf.num != 1 || gf.wt != 2) continue;
            const uint8_t *nc = gf.p, *ne = gf.p + gf.len; /* NodeProto */
            const MeOpDesc *dsc = body_op(o, gf.p, gf.len);
            int slot = 0;
            MemField nf = { 0 };
            while ((r = mem_next(&nc, ne, &nf)) > 0) {
                if (nf.wt != 2) continue;
                if (nf.num == 5) {
                    int rc = capture_names(o, n, nf.p, nf.len, depth + 1, cp);
                    if (rc < 0) return rc;
                    continue;
                }
                if (nf.num != 1) continue;
                int k = slot++;
                if (!nf.len || nf.len > ME_MAX_NAME || memchr(nf.p, 0, nf.len)) continue;
                int vi = me_strmap_get_n(&o->g->names, (const char *)nf.p, nf.len);
                if (vi < 0 || (o->g->v[vi].kind != ME_V_INIT && o->g->v[vi].kind != ME_V_INPUT)) continue;
                char role = me_op_role(dsc, k);
                if (o->g->v[vi].kind == ME_V_INPUT && (role == 'w' || role == 'b')) {
                    /* a graph input a body reads as a weight: evidence for me_load_weight_inputs */
                    if (me_grow(&o->subw, &o->cap_subw, o->nsubw + 1, sizeof(int)) < 0) return ME_ENOMEM;
                    o->subw[o->nsubw++] = vi;
                }
                if (vi >= o->cap_mark_n) { /* values made since: room for all of them */
                    int n_old = o->cap_mark_n, want = o->g->nv + 1;
                    if (me_grow(&o->cap_mark, &o->cap_mark_n, want, sizeof(int)) < 0) return ME_ENOMEM;
                    memset(o->cap_mark + n_old, 0, sizeof(int) * (size_t)(o->cap_mark_n - n_old));
                }
                bool have = o->cap_mark[vi] == cp->stamp;
                for (int j = 0; j < n->n_in && !have; j++) have = n->in[j] == vi;
                if (have) continue;
                if (me_grow(&cp->v, &cp->cap, cp->n + 1, sizeof(int)) < 0) return ME_ENOMEM;
                cp->v[cp->n++] = vi;
                o->cap_mark[vi] = cp->stamp;
            }
            if (r < 0) break;
        }
        if (r < 0) break;
    }
    if (r < 0) return me_error(o->d, ME_EINVAL, "%s: node '%s' (%s): a subgraph attribute is truncated or corrupt protobuf", o->g->path, n->name, n->op);
    return 0;
}

/* Prefetches the name slots of the node or initializer a few ahead, when
 * its bytes are in the read window already (never moves the window).
 * fields: which string fields are names (bit per field number). */
static void prefetch_names(OCtx *o, const PbField *fld, unsigned fields)
{
    Reader *r = o->r;
    const uint8_t *win = r->mem ? r->mem : r->buf;
    uint64_t woff = r->mem ? 0 : r->woff, wlen = r->mem ? r->size : r->wlen;
    if (fld->off < woff || fld->off + fld->len > woff + wlen) return;
    const uint8_t *cur = win + (fld->off - woff), *end = cur + fld->len;
    MemField f;
    while (mem_next(&cur, end, &f) > 0)
        if (f.wt == 2 && f.num < 32 && (fields >> f.num & 1) && f.len) me_strmap_prefetch_n(&o->g->names, (const char *)f.p, f.len);
}

/* NodeProto is read at the wire level: its names go straight from the
 * read window into the graph (no protobuf-c copy to make and free, a
 * million times over); only attributes are unpacked by protobuf-c. */
static int inline_call(OCtx *o, const Func *fn, const Call *parent, const uint8_t *data, size_t len, const char *name, size_t name_len);

static const Func *find_func(const OCtx *o, const char *op, size_t op_len, const char *domain, size_t domain_len)
{
    for (int i = 0; i < o->nfn; i++) {
        const Func *fn = &o->fn[i];
        if (strlen(fn->name) == op_len && !memcmp(fn->name, op, op_len) && strlen(fn->domain) == domain_len && !memcmp(fn->domain, domain, domain_len))
            return fn;
    }
    return NULL;
}

/* Value for name[0..len) as the node at call's level means it: a formal
 * input or output is the call's own value (1: the call left it out), other
 * names are prefixed with the call's name. */
static int map_name(OCtx *o, const Call *call, const char *name, size_t len, int *vi)
{
    if (!call) return me_graph_value_n(o->g, name, len, vi);
    for (int i = 0; i < call->fn->n_in; i++)
        if (strlen(call->fn->in[i]) == len && !memcmp(call->fn->in[i], name, len)) {
            *vi = i < call->n_in ? call->in[i] : -1;
            return *vi >= 0 ? 0 : 1;
        }
    for (int i = 0; i < call->fn->n_out; i++)
        if (strlen(call->fn->out[i]) == len && !memcmp(call->fn->out[i], name, len)) {
            *vi = i < call->n_out ? call->out[i] : -1;
            return *vi >= 0 ? 0 : 1;
        }
    size_t pl = strlen(call->prefix);
    char *full = me_malloc(pl + 1 + len + 1);
    if (!full) return ME_ENOMEM;
    memcpy(full, call->prefix, pl);
    full[pl] = '/';
    memcpy(full + pl + 1, name, len);
    int rc = me_graph_value_n(o->g, full, pl + 1 + len, vi);
    me_free(full);
    return rc;
}

/* The attribute a function body's reference (ref_attr_name) stands for:
 * the call's, else the function's default; NULL: absent. */
static const Onnx__AttributeProto *ref_attr(const Call *call, const char *ref)
{
    for (int i = 0; i < call->n_attrs; i++)
        if (call->attrs[i].name && !strcmp(call->attrs[i].name, ref)) return &call->attrs[i];
    for (int i = 0; i < call->fn->n_defaults; i++)
        if (call->fn->defaults[i]->name && !strcmp(call->fn->defaults[i]->name, ref)) return call->fn->defaults[i];
    return NULL;
}

static int load_node_in(OCtx *o, const PbField *fld, int index, const Call *call);

/* A NodeProto's metadata entry (StringStringEntryProto, key 1, value 2):
 * the value of pkg.torch.onnx.name_scopes, if that is its key. */
static void metadata_scopes(const uint8_t *p, size_t len, const char **v, size_t *vlen)
{
    const uint8_t *cur = p, *end = p + len;
    const char *key = NULL, *val = NULL;
    size_t kl = 0, vl = 0;
    MemField f;
    while (mem_next(&cur, end, &f) > 0) {
        if (f.wt != 2) continue;
        if (f.num == 1) { key = (const char *)f.p; kl = f.len; }
        if (f.num == 2) { val = (const char *)f.p; vl = f.len; }
    }
    if (key && val && kl == strlen(ME_TORCH_NAME_SCOPES) && !memcmp(key, ME_TORCH_NAME_SCOPES, kl)) {
        *v = val;
        *vlen = vl;
    }
}

static const char *scoped_of(const OCtx *o, int ni) { return ni < o->cap_scoped ? o->scoped[ni] : NULL; }

static int load_node(OCtx *o, const PbField *fld, int index) { return load_node_in(o, fld, index, NULL); }

static int load_node_in(OCtx *o, const PbField *fld, int index, const Call *call)
{
    const uint8_t *data;
    uint8_t *buf;
    int rc = read_message(o, fld, &data, &buf);
    if (rc < 0) return rc;
    const uint8_t *cur = data, *end = data + fld->len;
    const char *name = "", *op = "", *domain = "", *scopes = NULL;
    size_t name_len = 0, op_len = 0, domain_len = 0, scopes_len = 0;
    int n_in = 0, n_out = 0, n_attr = 0, r;
    size_t longest = 0;
    bool utf8 = true;
    MemField f = { 0 };
    while ((r = mem_next(&cur, end, &f)) > 0) {
        if (f.num <= 7 && f.wt != 2) { r = -1; break; } /* every NodeProto field up to 7 is a string or message */
        const char *str = (const char *)f.p;
        if (f.num <= 4 || f.num == 7) longest = f.len > longest ? f.len : longest;
        switch (f.num) {
        case 5: n_attr++; break;
        case 1: case 2:
            if (f.num == 1) n_in++; else n_out++;
            utf8 = utf8 && me_utf8_valid_n(str, f.len);
            break;
        case 3: name = str; name_len = f.len; break;
        case 4: op = str; op_len = f.len; break;
        case 7: domain = str; domain_len = f.len; break;
        case 9: /* metadata_props (ONNX >= 1.16, newer than Debian's onnx.proto) */
            if (f.wt == 2 && !call) metadata_scopes(f.p, f.len, &scopes, &scopes_len);
            break;
        default: break;
        }
    }
    char fallback[64];
    if (r < 0) {
        snprintf(fallback, sizeof(fallback), "node %d", index);
        rc = bad(o, fallback);
        goto end;
    }
    if (longest > ME_MAX_NAME) {
        rc = me_error(o->d, ME_EINVAL, "%s: node %d: a name (node, op, domain, input or output) is %zu bytes long; the limit is %d",
                      o->g->path, index, longest, ME_MAX_NAME);
        goto end;
    }
    if (!name_len) {
        snprintf(fallback, sizeof(fallback), "%.*s_%d", op_len && op_len < 40 ? (int)op_len : 4, op_len && op_len < 40 ? op : "node", index);
        name = fallback;
        name_len = strlen(fallback);
    }
    utf8 = utf8 && me_utf8_valid_n(name, name_len) && me_utf8_valid_n(op, op_len) && me_utf8_valid_n(domain, domain_len);
    if (!utf8) {
        rc = me_error(o->d, ME_EINVAL, "%s: node %d: a name (node, op, input or output) is not valid UTF-8", o->g->path, index);
        goto end;
    }
    if (!op_len) {
        rc = me_error(o->d, ME_EINVAL, "%s: node %d ('%.*s') has no op_type", o->g->path, index, (int)(name_len < 200 ? name_len : 200), name);
        goto end;
    }
    if (n_in > 4096 || n_out > 4096 || n_attr > ME_MAX_ATTRS) {
        rc = me_error(o->d, ME_EINVAL, "%s: node '%.*s' (%.*s) has %d inputs, %d outputs and %d attributes (limits 4096, 4096, %d)", o->g->path,
                      (int)(name_len < 200 ? name_len : 200), name, (int)(op_len < 64 ? op_len : 64), op, n_in, n_out, n_attr, ME_MAX_ATTRS);
        goto end;
    }
    if (o->nfn) {
        const Func *fn = find_func(o, op, op_len, domain, domain_len);
        if (fn) {
            rc = inline_call(o, fn, call, data, (size_t)fld->len, name, name_len);
            goto end;
        }
    }
    if (name == fallback && !call) {
        /* noted once the node is sure to be added (a call to a local
         * function adds its body instead, possibly nothing): unique_names
         * makes sure no explicit name equals it */
        if (me_grow(&o->gen, &o->cap_gen, o->ngen + 1, sizeof(int)) < 0) { rc = ME_ENOMEM; goto end; }
        o->gen[o->ngen++] = o->g->nn;
    }
    char *full = NULL;
    if (call) { /* a function body's node: named under its call */
        size_t pl = strlen(call->prefix);
        if (!(full = me_malloc(pl + 1 + name_len + 1))) { rc = ME_ENOMEM; goto end; }
        memcpy(full, call->prefix, pl);
        full[pl] = '/';
        memcpy(full + pl + 1, name, name_len);
        name = full;
        name_len += pl + 1;
    }
    int ni;
    rc = me_graph_add_node_n(o->g, op, op_len, name, name_len, n_in, n_out, &ni);
    me_free(full);
    if (rc < 0) goto end;
    MeNode *n = &o->g->n[ni];
    Captures caps = { .stamp = ni + 1 };
    if (domain_len && !(n->domain = me_graph_strndup(o->g, domain, domain_len))) { rc = ME_ENOMEM; goto end; }
    char *scoped = NULL;
    if (scopes && (rc = me_torch_scoped_name(o->g, &o->ts, scopes, scopes_len, &scoped)) < 0) goto end;
    if (scoped) {
        if (me_grow(&o->scoped, &o->cap_scoped, ni + 1, sizeof(char *)) < 0) { rc = ME_ENOMEM; goto end; }
        o->scoped[ni] = scoped;
    }
    if (!(n->module = module_name(o->g, scoped ? scoped : n->name))) { rc = ME_ENOMEM; goto end; }
    int ki = 0, ko = 0;
    for (cur = data; rc >= 0 && mem_next(&cur, end, &f) > 0;) {
        int vi;
        if (f.num == 1 || f.num == 2) {
            int *slot = f.num == 1 ? &o->g->n[ni].in[ki++] : &o->g->n[ni].out[ko++];
            if (!f.len) continue; /* absent optional input or output */
            if ((rc = map_name(o, call, (const char *)f.p, f.len, &vi)) < 0) break;
            if (rc > 0) { rc = 0; continue; } /* a formal input the call left out */
            *slot = vi;
        } else if (f.num == 5) {
            if ((rc = graph_attr(o, &o->g->n[ni], f.p, f.len)) != 0) {
                if (rc > 0 && !call) rc = capture_names(o, &o->g->n[ni], f.p, f.len, 1, &caps);
                if (rc > 0) rc = 0;
                continue;
            }
            if (pb_too_deep(&onnx__attribute_proto__descriptor, f.p, f.len, 1)) {
                rc = me_error(o->d, ME_EINVAL, "%s: node '%s' (%s): attribute %d: messages nested deeper than %d",
                              o->g->path, o->g->n[ni].name, o->g->n[ni].op, o->g->n[ni].n_attr, ME_MAX_PB_DEPTH);
                break;
            }
            Onnx__AttributeProto *ap = onnx__attribute_proto__unpack(NULL, f.len, f.p);
            if (!ap) {
                rc = me_error(o->d, ME_EINVAL, "%s: node '%s' (%s): attribute %d: truncated or corrupt protobuf",
                              o->g->path, o->g->n[ni].name, o->g->n[ni].op, o->g->n[ni].n_attr);
                break;
            }
            if (call && ap->ref_attr_name && *ap->ref_attr_name) {
                /* a reference to the call's attribute, under this name */
                const Onnx__AttributeProto *ref = ref_attr(call, ap->ref_attr_name);
                if (ref) {
                    Onnx__AttributeProto tmp = *ref;
                    tmp.name = ap->name;
                    rc = convert_attr(o, &o->g->n[ni], &tmp);
                }
            } else {
                rc = convert_attr(o, &o->g->n[ni], ap);
            }
            onnx__attribute_proto__free_unpacked(ap, NULL);
        }
    }
    if (rc >= 0 && caps.n) { /* the outer weights the node's subgraphs read: extra inputs */
        MeNode *nn = &o->g->n[ni];
        int *in = caps.n <= 4096 ? me_arena_alloc(&o->g->arena, sizeof(int) * (size_t)(nn->n_in + caps.n)) : NULL;
        if (!in) rc = caps.n > 4096 ? me_error(o->d, ME_EINVAL, "%s: node '%s' (%s): its subgraphs read over 4096 outer weights",
                                               o->g->path, nn->name, nn->op) : ME_ENOMEM;
        else {
            if (nn->n_in) memcpy(in, nn->in, sizeof(int) * (size_t)nn->n_in);
            memcpy(in + nn->n_in, caps.v, sizeof(int) * (size_t)caps.n);
            nn->in = in;
            nn->n_in += caps.n;
        }
    }
    me_free(caps.v);
end:
    me_free(buf);
    return rc;
}

/* Inlines a call of fn (the call node's NodeProto in data[0..len)): its
 * inputs and outputs and attributes are taken from data first, since
 * reading the body moves the read window data may point into. */
static int inline_call(OCtx *o, const Func *fn, const Call *parent, const uint8_t *data, size_t len, const char *name, size_t name_len)
{
    int depth = parent ? parent->depth + 1 : 1;
    if (depth > ME_MAX_CALL_DEPTH)
        return me_error(o->d, ME_EINVAL, "%s: node '%.*s': calls of local functions nest deeper than %d (function '%s' calls itself?)",
                        o->g->path, (int)(name_len < 200 ? name_len : 200), name, ME_MAX_CALL_DEPTH, fn->name);
    if (fn->n_nodes > ME_MAX_NODES - o->g->nn)
        return me_error(o->d, ME_EINVAL, "%s: inlining local function '%s' makes more than %d nodes", o->g->path, fn->name, ME_MAX_NODES);
    Call c = { .fn = fn, .parent = parent, .depth = depth };
    Onnx__AttributeProto **owned = NULL;
    int n_owned = 0, rc = 0;
    size_t pl = parent ? strlen(parent->prefix) + 1 : 0;
    char *prefix = me_malloc(pl + name_len + 1);
    if (!prefix) return ME_ENOMEM;
    if (parent) {
        memcpy(prefix, parent->prefix, pl - 1);
        prefix[pl - 1] = '/';
    }
    memcpy(prefix + pl, name, name_len);
    prefix[pl + name_len] = 0;
    c.prefix = prefix;
    const uint8_t *cur = data, *end = data + len;
    MemField f;
    int n_in = 0, n_out = 0, n_attr = 0;
    while (mem_next(&cur, end, &f) > 0) {
        n_in += f.num == 1;
        n_out += f.num == 2;
        n_attr += f.num == 5;
    }
    c.in = me_malloc(sizeof(int) * (size_t)(n_in + 1));
    c.out = me_malloc(sizeof(int) * (size_t)(n_out + 1));
    c.attrs = me_calloc((size_t)n_attr + 1, sizeof(*c.attrs));
    owned = me_calloc((size_t)n_attr + 1, sizeof(*owned));
    if (!c.in || !c.out || !c.attrs || !owned) { rc = ME_ENOMEM; goto end; }
    for (cur = data; rc >= 0 && mem_next(&cur, end, &f) > 0;) {
        if (f.num == 1 || f.num == 2) {
            int vi = -1;
            if (f.len && (rc = map_name(o, parent, (const char *)f.p, f.len, &vi)) < 0) break;
            if (rc > 0) { rc = 0; vi = -1; }
            if (f.num == 1) c.in[c.n_in++] = vi;
            else c.out[c.n_out++] = vi;
        } else if (f.num == 5) {
            Onnx__AttributeProto *ap = pb_too_deep(&onnx__attribute_proto__descriptor, f.p, f.len, 1) ? NULL
                                     : onnx__attribute_proto__unpack(NULL, f.len, f.p);
            if (!ap) {
                rc = me_error(o->d, ME_EINVAL, "%s: node '%s' (%s): an attribute is corrupt or nested too deep", o->g->path, prefix, fn->name);
                break;
            }
            owned[n_owned++] = ap;
            const Onnx__AttributeProto *val = ap;
            if (parent && ap->ref_attr_name && *ap->ref_attr_name && !(val = ref_attr(parent, ap->ref_attr_name))) continue;
            c.attrs[c.n_attrs] = *val;
            c.attrs[c.n_attrs++].name = ap->name;
        }
    }
    for (int i = 0; rc >= 0 && i < fn->n_nodes; i++) rc = load_node_in(o, &fn->nodes[i], i, &c);
end:
    for (int i = 0; i < n_owned; i++) onnx__attribute_proto__free_unpacked(owned[i], NULL);
    me_free(owned);
    me_free(c.attrs);
    me_free(c.in);
    me_free(c.out);
    me_free(prefix);
    return rc;
}

/* A string field's bytes, copied (NUL-terminated, valid UTF-8), or NULL. */
static char *field_str(OCtx *o, const PbField *f)
{
    if (f->wt != 2 || f->len > ME_MAX_NAME) return NULL;
    const uint8_t *p = f->len ? rd_peek(o->r, f->off, (size_t)f->len) : (const uint8_t *)"";
    if (!p || memchr(p, 0, (size_t)f->len) || !me_utf8_valid_n((const char *)p, (size_t)f->len)) return NULL;
    return me_strndup((const char *)p, (size_t)f->len);
}

/* FunctionProto at the wire level: name 1, input 4, output 5, node 7,
 * domain 10, attribute_proto 11 (defaults); its nodes stay in the file. */
static int load_function(OCtx *o, const PbField *fld, Func *fn)
{
    uint64_t cur = fld->off, end = fld->off + fld->len;
    PbField f;
    int r, cap_in = 0, cap_out = 0, cap_nodes = 0, cap_def = 0;
    while ((r = pb_next(o->r, &cur, end, &f)) > 0) {
        if (f.wt != 2) continue;
        char *str = NULL;
        if ((f.num == 1 || f.num == 4 || f.num == 5 || f.num == 10) && !(str = field_str(o, &f)))
            return me_error(o->d, ME_EINVAL, "%s: a local function has a name, input, output or domain that is not a valid string", o->g->path);
        if (f.num == 1) { me_free(fn->name); fn->name = str; }
        else if (f.num == 10) { me_free(fn->domain); fn->domain = str; }
        else if (f.num == 4 || f.num == 5) {
            char ***arr = f.num == 4 ? &fn->in : &fn->out;
            int *n = f.num == 4 ? &fn->n_in : &fn->n_out, *cap = f.num == 4 ? &cap_in : &cap_out;
            if (*n >= 4096 || me_grow(arr, cap, *n + 1, sizeof(char *)) < 0) { me_free(str); return *n >= 4096 ? bad(o, "function") : ME_ENOMEM; }
            (*arr)[(*n)++] = str;
        } else if (f.num == 7) {
            if (fn->n_nodes >= ME_MAX_NODES || me_grow(&fn->nodes, &cap_nodes, fn->n_nodes + 1, sizeof(PbField)) < 0) return ME_ENOMEM;
            fn->nodes[fn->n_nodes++] = f;
        } else if (f.num == 11) {
            const uint8_t *data;
            uint8_t *buf;
            int rc = read_message(o, &f, &data, &buf);
            if (rc < 0) return rc;
            Onnx__AttributeProto *ap = pb_too_deep(&onnx__attribute_proto__descriptor, data, (size_t)f.len, 1) ? NULL
                                     : onnx__attribute_proto__unpack(NULL, (size_t)f.len, data);
            me_free(buf);
            if (!ap) return bad(o, "function attribute");
            if (fn->n_defaults >= ME_MAX_ATTRS || me_grow(&fn->defaults, &cap_def, fn->n_defaults + 1, sizeof(*fn->defaults)) < 0) {
                onnx__attribute_proto__free_unpacked(ap, NULL);
                return fn->n_defaults >= ME_MAX_ATTRS ? bad(o, "function attributes") : ME_ENOMEM;
            }
            fn->defaults[fn->n_defaults++] = ap;
        }
    }
    if (r < 0) return bad(o, "function");
    if (!fn->name || !*fn->name) return me_error(o->d, ME_EINVAL, "%s: a local function has no name", o->g->path);
    if (!fn->domain && !(fn->domain = me_strdup(""))) return ME_ENOMEM;
    return 0;
}

static void free_functions(OCtx *o)
{
    for (int i = 0; i < o->nfn; i++) {
        Func *fn = &o->fn[i];
        for (int k = 0; k < fn->n_in; k++) me_free(fn->in[k]);
        for (int k = 0; k < fn->n_out; k++) me_free(fn->out[k]);
        for (int k = 0; k < fn->n_defaults; k++) onnx__attribute_proto__free_unpacked(fn->defaults[k], NULL);
        me_free(fn->in);
        me_free(fn->out);
        me_free(fn->defaults);
        me_free(fn->nodes);
        me_free(fn->name);
        me_free(fn->domain);
    }
    me_free(o->fn);
    o->fn = NULL;
    o->nfn = 0;
}

/* An unnamed node is called "<op>_<index>", which another node may carry
 * as its explicit name (exporters write "Relu_1"): reports and --freeze
 * patterns would then mean two nodes by one name. Explicit names are kept
 * as the file has them; a made-up name that meets one (or an earlier
 * made-up one) takes the first free "_2", "_3", ... suffix. */
static int unique_names(OCtx *o)
{
    if (!o->ngen) return 0;
    MeGraph *g = o->g;
    MeStrMap taken = { 0 };
    int rc = me_strmap_reserve(&taken, (uint32_t)g->nn);
    int k = 0;
    for (int i = 0; rc >= 0 && i < g->nn; i++) {
        if (k < o->ngen && o->gen[k] == i) { k++; continue; }
        rc = me_strmap_put(&taken, g->n[i].name, i);
    }
    for (k = 0; rc >= 0 && k < o->ngen; k++) {
        MeNode *n = &g->n[o->gen[k]];
        if (me_strmap_get(&taken, n->name) >= 0) {
            char buf[96];
            for (int s = 2;; s++) {
                snprintf(buf, sizeof(buf), "%s_%d", n->name, s);
                if (me_strmap_get(&taken, buf) < 0) break;
            }
            if (!(n->name = me_graph_strdup(g, buf))) { rc = ME_ENOMEM; break; }
            if (!scoped_of(o, o->gen[k]) && !(n->module = module_name(g, n->name))) { rc = ME_ENOMEM; break; }
        }
        rc = me_strmap_put(&taken, n->name, o->gen[k]);
    }
    me_strmap_free(&taken);
    return rc < 0 ? ME_ENOMEM : 0;
}

/* Graph inputs/outputs/value_info: element type and shape, symbolic dims named. */
static int load_value_info(OCtx *o, const PbField *fld, int which, int index)
{
    static const char *const kinds[] = { "input", "output", "value_info" };
    const uint8_t *data;
    uint8_t *p;
    int rr = read_message(o, fld, &data, &p);
    if (rr < 0) return rr;
    char what[64];
    snprintf(what, sizeof(what), "graph %s %d", kinds[which], index);
    if (pb_too_deep(&onnx__value_info_proto__descriptor, data, (size_t)fld->len, 1)) {
        me_free(p);
        return me_error(o->d, ME_EINVAL, "%s: %s: its type nests deeper than %d messages", o->g->path, what, ME_MAX_PB_DEPTH);
    }
    Onnx__ValueInfoProto *vp = onnx__value_info_proto__unpack(NULL, (size_t)fld->len, data);
    me_free(p);
    if (!vp) return bad(o, what);
    int rc = 0;
    if (!vp->name || !*vp->name || strlen(vp->name) > ME_MAX_NAME) {
        rc = me_error(o->d, ME_EINVAL, "%s: %s has no name, or one over %d bytes", o->g->path, what, ME_MAX_NAME);
        goto end;
    }
    if (!me_utf8_valid(vp->name)) {
        rc = me_error(o->d, ME_EINVAL, "%s: %s: its name is not valid UTF-8", o->g->path, what);
        goto end;
    }
    int existing = me_graph_find(o->g, vp->name);
    if (which == 0 && existing >= 0 && o->g->v[existing].kind == ME_V_INIT) goto end; /* a weight listed as input */
    int vi;
    if ((rc = me_graph_value(o->g, vp->name, &vi)) < 0) goto end;
    MeValue *v = &o->g->v[vi];
    const Onnx__TypeProto *tp = vp->type;
    const Onnx__TypeProto__Tensor *tt = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
    if (which == 0) {
        if (!tt || !tt->shape) {
            rc = me_error(o->d, ME_EINVAL, "%s: graph input '%s' has no tensor type with a shape", o->g->path, vp->name);
            goto end;
        }
        if (tt->shape->n_dim > ME_MAX_RANK) {
            rc = me_error(o->d, ME_EINVAL, "%s: graph input '%s' has rank %zu, above %d", o->g->path, vp->name, tt->shape->n_dim, ME_MAX_RANK);
            goto end;
        }
        if (!tt->has_elem_type || tt->elem_type <= 0 || tt->elem_type >= ME_DT_COUNT) {
            rc = me_error(o->d, ME_EINVAL, "%s: graph input '%s' has an unknown element type", o->g->path, vp->name);
            goto end;
        }
        if (v->kind == ME_V_INPUT) {
            rc = me_error(o->d, ME_EINVAL, "%s: graph input '%s' is listed twice", o->g->path, vp->name);
            goto end;
        }
        v->kind = ME_V_INPUT;
        v->dtype = (MeDType)tt->elem_type;
        v->dtype_declared = true;
        v->shape.rank = (int)tt->shape->n_dim;
        if (!(v->sym = me_calloc(ME_MAX_RANK, sizeof(char *)))) { rc = ME_ENOMEM; goto end; }
        for (size_t k = 0; k < tt->shape->n_dim; k++) {
            const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
            v->shape.d[k] = -1;
            if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
                if (dm->dim_value < 0 || dm->dim_value > ME_MAX_DIM) {
                    rc = me_error(o->d, ME_EINVAL, "%s: graph input '%s' dim %zu is %lld", o->g->path, vp->name, k, (long long)dm->dim_value);
                    goto end;
                }
                v->shape.d[k] = dm->dim_value;
            } else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param && *dm->dim_param) {
                if (!(v->sym[k] = me_strdup(dm->dim_param))) { rc = ME_ENOMEM; goto end; }
            }
        }
        if ((rc = me_graph_add_input(o->g, vi)) < 0) goto end;
    } else if (which == 1) {
        if ((rc = me_graph_add_output(o->g, vi)) < 0) goto end;
    }
    /* The declared shape, symbolic dims named, serves ops the registry
     * lacks at whatever binding (shape.c resolves the names); a fully
     * static one is their shape right away. */
    if (which != 0 && tt && tt->shape && tt->shape->n_dim <= ME_MAX_RANK && v->kind == ME_V_ACT && !v->decl &&
        tt->has_elem_type && tt->elem_type > 0 && tt->elem_type < ME_DT_COUNT) {
        MeShape s = { .rank = (int)tt->shape->n_dim };
        bool ok = true;
        for (size_t k = 0; k < tt->shape->n_dim && ok; k++) {
            const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
            s.d[k] = -1;
            if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dm->dim_value >= 0 && dm->dim_value <= ME_MAX_DIM)
                s.d[k] = dm->dim_value;
            else ok = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param && *dm->dim_param;
        }
        for (size_t k = 0; k < tt->shape->n_dim && ok; k++) {
            const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
            if (s.d[k] >= 0) continue;
            if (!v->sym && !(v->sym = me_calloc(ME_MAX_RANK, sizeof(char *)))) { rc = ME_ENOMEM; goto end; }
            if (!(v->sym[k] = me_strdup(dm->dim_param))) { rc = ME_ENOMEM; goto end; }
        }
        if (ok && (rc = me_graph_add_decl(o->g, vi, &s, (MeDType)tt->elem_type)) < 0) goto end;
    }
    /* A fully static shape from the file serves ops the registry lacks. */
    if (which != 0 && tt && tt->shape && tt->shape->n_dim <= ME_MAX_RANK && v->kind == ME_V_ACT && !v->known) {
        bool ok = tt->has_elem_type && tt->elem_type > 0 && tt->elem_type < ME_DT_COUNT;
        MeShape s = { .rank = (int)tt->shape->n_dim };
        for (size_t k = 0; k < tt->shape->n_dim && ok; k++) {
            const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
            ok = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dm->dim_value >= 0 && dm->dim_value <= ME_MAX_DIM;
            s.d[k] = dm->dim_value;
        }
        if (ok) {
            v->shape = s;
            v->dtype = (MeDType)tt->elem_type;
            v->known = true;
        }
    }
end:
    onnx__value_info_proto__free_unpacked(vp, NULL);
    return rc;
}

static int load_graph(OCtx *o, uint64_t off, uint64_t len)
{
    /* Collect field positions first: initializers must be known before
     * inputs and nodes, whatever order the writer chose. */
    enum { S_NODE, S_INIT, S_INPUT, S_OUTPUT, S_VI, S_SPARSE, S_COUNT };
    MePrefault *prefault = NULL;
    PbField *spans[S_COUNT] = { NULL };
    int counts[S_COUNT] = { 0 }, caps[S_COUNT] = { 0 };
    uint64_t cur = off, end = off + len;
    PbField f;
    int r, rc = 0;
    while ((r = pb_next(o->r, &cur, end, &f)) > 0) {
        int slot = f.num == 1 ? S_NODE : f.num == 5 ? S_INIT : f.num == 11 ? S_INPUT : f.num == 12 ? S_OUTPUT : f.num == 13 ? S_VI : -1;
        if (f.num == 2 && f.wt == 2 && !o->g->name && f.len < 4096) {
            const uint8_t *nm = rd_peek(o->r, f.off, (size_t)f.len);
            if (!nm) { rc = bad(o, "graph name"); goto end; }
            if (!(o->g->name = me_strndup((const char *)nm, (size_t)f.len))) { rc = ME_ENOMEM; goto end; }
        }
        if (f.num == 15) slot = S_SPARSE;
        if (slot < 0) continue;
        if (f.wt != 2) { rc = bad(o, "graph field"); goto end; }
        if (me_grow(&spans[slot], &caps[slot], counts[slot] + 1, sizeof(PbField)) < 0) { rc = ME_ENOMEM; goto end; }
        spans[slot][counts[slot]++] = f;
    }
    if (r < 0) { rc = bad(o, "graph"); goto end; }
    if (!counts[S_NODE]) { rc = me_error(o->d, ME_EINVAL, "%s: the graph has no nodes", o->g->path); goto end; }
    for (int k = 0; k < S_COUNT; k++)
        if (counts[k] > ME_MAX_NODES) {
            rc = me_error(o->d, ME_EINVAL, "%s: the graph lists %d %s, above memest's limit of %d", o->g->path, counts[k],
                          k == S_NODE ? "nodes" : k == S_INIT ? "initializers" : "inputs, outputs or value_infos", ME_MAX_NODES);
            goto end;
        }
    /* nodes exactly; values: weights, inputs and about one output per node */
    if (me_graph_reserve(o->g, counts[S_INIT] + counts[S_INPUT] + counts[S_NODE] + counts[S_NODE] / 8, counts[S_NODE]) < 0) { rc = ME_ENOMEM; goto end; }
    if (counts[S_NODE] > 100000) {
        /* a big graph: its names and edge lists take about what its nodes
         * take in the file; fault its arrays in on the other core meanwhile */
        uint64_t node_bytes = 0;
        for (int i = 0; i < counts[S_NODE]; i++) node_bytes += spans[S_NODE][i].len;
        size_t arena = node_bytes < (UINT64_C(1) << 34) ? (size_t)(node_bytes + node_bytes / 4) : 0;
        void *room = arena ? me_arena_reserve(&o->g->arena, arena) : NULL;
        void *regions[] = { o->g->v, o->g->n, o->g->names.slots, room };
        size_t lens[] = { sizeof(MeValue) * (size_t)o->g->cap_v, sizeof(MeNode) * (size_t)o->g->cap_n,
                          sizeof(MeStrSlot) * o->g->names.cap, room ? arena : 0 };
        prefault = o->threads ? me_prefault_start(regions, lens, 4) : NULL;
    }
    for (int i = 0; i < counts[S_INIT] && rc >= 0; i++) {
        if (i + 8 < counts[S_INIT]) prefetch_names(o, &spans[S_INIT][i + 8], 1u << 8); /* TensorProto.name */
        rc = load_initializer(o, spans[S_INIT][i].off, spans[S_INIT][i].len, i);
    }
    for (int i = 0; i < counts[S_SPARSE] && rc >= 0; i++) rc = load_sparse_initializer(o, &spans[S_SPARSE][i], i);
    for (int i = 0; i < counts[S_INPUT] && rc >= 0; i++) rc = load_value_info(o, &spans[S_INPUT][i], 0, i);
    for (int i = 0; i < counts[S_NODE] && rc >= 0; i++) {
        if (i + 4 < counts[S_NODE]) prefetch_names(o, &spans[S_NODE][i + 4], 1u << 1 | 1u << 2); /* inputs, outputs */
        rc = load_node(o, &spans[S_NODE][i], i);
    }
    if (rc >= 0) rc = unique_names(o);
    for (int i = 0; i < counts[S_OUTPUT] && rc >= 0; i++) rc = load_value_info(o, &spans[S_OUTPUT][i], 1, i);
    for (int i = 0; i < counts[S_VI] && rc >= 0; i++) rc = load_value_info(o, &spans[S_VI][i], 2, i);
    if (rc >= 0) rc = me_load_weight_inputs(o->g, o->subw, o->nsubw, o->d);
    if (rc >= 0 && !o->g->n_inputs) rc = me_error(o->d, ME_EINVAL, "%s: the graph has no inputs besides its weights", o->g->path);
    if (rc >= 0 && !o->g->n_outputs) rc = me_error(o->d, ME_EINVAL, "%s: the graph has no outputs", o->g->path);
end:
    me_prefault_join(prefault);
    for (int i = 0; i < S_COUNT; i++) me_free(spans[i]);
    return rc;
}

/* TorchScript names each module call's scope by the path of attribute
 * names from the root, made unique by "_<k>" on the k-th repeat of the
 * whole path (naming.cpp, ScopedNodeNameGenerator::GetFullScopeName over
 * variableNameFromRoot): a module called again (ALBERT's shared layer,
 * `for _ in range(4): x = self.layer(x)`) is "/layer_1" for its own ops,
 * but its child q's ops are "/layer/q_1", named under the first call. Read
 * by name, the first call would last until the last one returns and hold
 * its arguments that long. So a child's k-th of m calls is re-parented to
 * its parent's call k / (m / n) of n, when n divides m and the file order
 * agrees (its ops after the previous call's own, before the next one's).
 * A torch.export file numbers every segment (onnx_torch.c): not needed. */
typedef struct ScopeCall {
    const char *name;
    size_t len; /* the name without its call number */
    int scope, k;
} ScopeCall;

static int call_cmp(const void *a, const void *b)
{
    const ScopeCall *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    int c = memcmp(x->name, y->name, x->len);
    return c ? c : (x->k > y->k) - (x->k < y->k);
}

/* Scopes renumbered so that a parent comes before its children again
 * (MeScope's order, which passes walking up from children rely on): by
 * depth, in their order within one depth (a counting sort). */
static int renumber_scopes(MeGraph *g)
{
    int ns = g->nscopes, maxd = 0;
    for (int s = 0; s < ns; s++)
        if (g->scopes[s].depth > maxd) maxd = g->scopes[s].depth;
    int *to = me_calloc((size_t)ns + (size_t)maxd + 2, sizeof(int)), *at = to ? to + ns : NULL;
    MeScope *old = me_malloc(sizeof(MeScope) * (size_t)ns);
    if (!to || !old) {
        me_free(to);
        me_free(old);
        return ME_ENOMEM;
    }
    for (int s = 0; s < ns; s++) at[g->scopes[s].depth + 1]++;
    for (int d = 1; d <= maxd + 1; d++) at[d] += at[d - 1]; /* at[d]: the first index of depth d */
    for (int s = 0; s < ns; s++) to[s] = at[g->scopes[s].depth]++;
    memcpy(old, g->scopes, sizeof(MeScope) * (size_t)ns);
    for (int s = 0; s < ns; s++) {
        MeScope x = old[s];
        if (x.parent >= 0) x.parent = to[x.parent];
        g->scopes[to[s]] = x;
    }
    for (int i = 0; i < g->nn; i++)
        if (g->n[i].scope >= 0) g->n[i].scope = to[g->n[i].scope];
    me_free(to);
    me_free(old);
    return 0;
}

static int repoint_calls(MeGraph *g)
{
    if (me_graph_scopes(g) < 0) return ME_ENOMEM;
    int ns = g->nscopes, moved = 0;
    int *first = me_malloc(sizeof(int) * 4 * (size_t)ns);
    ScopeCall *c = me_malloc(sizeof(ScopeCall) * (size_t)ns);
    if (!first || !c) {
        me_free(first);
        me_free(c);
        return ME_ENOMEM;
    }
    int *last = first + ns, *run = first + 2 * ns, *calls = first + 3 * ns;
    for (int s = 0; s < ns; s++) {
        first[s] = last[s] = run[s] = -1;
        calls[s] = 0;
        c[s] = (ScopeCall){ .name = g->scopes[s].name, .scope = s };
        c[s].len = me_call_base(c[s].name, &c[s].k);
    }
    for (int i = 0; i < g->nn; i++) {
        int s = g->n[i].scope;
        if (first[s] < 0) first[s] = i;
        last[s] = i;
    }
    qsort(c, (size_t)ns, sizeof(ScopeCall), call_cmp);
    /* runs of one path: its calls 0..m-1, each with ops of its own (named);
     * calls[] of a run's first call: m, or 0 where the run is not that */
    for (int a = 0, b; a < ns; a = b) {
        for (b = a + 1; b < ns && c[b].len == c[a].len && !memcmp(c[b].name, c[a].name, c[a].len); b++) {}
        bool ok = c[a].name[0] != '/';
        for (int i = a; i < b && ok; i++) ok = c[i].k == i - a && first[c[i].scope] >= 0;
        run[c[a].scope] = a;
        calls[c[a].scope] = ok ? b - a : 0;
    }
    for (int a = 0; a < ns; a++) {
        int s0 = c[a].scope, m = calls[s0], p0 = g->scopes[s0].parent;
        if (c[a].k != 0 || !m || p0 < 0 || calls[p0] < 2 || m % calls[p0]) continue;
        int b = a + m, n = calls[p0], r = m / n, pa = run[p0];
        bool ok = true;
        for (int i = a; i < b && ok; i++) {
            int j = (i - a) / r, s = c[i].scope;
            ok = g->scopes[s].parent == p0 && (j == 0 || first[s] > last[c[pa + j - 1].scope]) &&
                 (j == n - 1 || last[s] < first[c[pa + j + 1].scope]);
        }
        for (int i = a; i < b && ok; i++) {
            int s = c[i].scope, p = c[pa + (i - a) / r].scope;
            if (p == p0) continue;
            g->scopes[s].parent = p;
            g->scopes[p0].children--;
            g->scopes[p].children++;
            moved |= p > s;
        }
    }
    me_free(first);
    me_free(c);
    return moved ? renumber_scopes(g) : 0;
}

/* torch scopes tell module calls from functional ones: an op whose scope
 * contains other scopes ran in a container's own forward (x + y,
 * torch.flatten), as did one with no scope at all. Hook-based tools
 * (torchstat, ptflops, thop) see only the module calls. */
static int mark_functional(MeGraph *g)
{
    if (me_graph_scopes(g) < 0) return ME_ENOMEM;
    for (int i = 0; i < g->nn; i++) {
        MeNode *n = &g->n[i];
        if (n->module[0] == '/' || g->scopes[n->scope].children) n->flags |= ME_N_FUNCTIONAL;
    }
    return 0;
}

/* torch.onnx names a scope for each module call only: a called container
 * shows as its own segment before its child's ("/layer1/layer1.0/conv1"),
 * a ModuleList its parent iterates never does ("/h.0/attn": `for blk in
 * self.h: x = blk(x)`). A dotted segment not led by its container's own
 * segment so names an uncalled container, every '.'-prefix of it (module
 * names hold no '.', torch's add_module refuses one). A torch.export-based
 * export states the same in metadata (onnx_torch.h), read as that name. */
static int mark_uncalled(MeGraph *g, const OCtx *oc)
{
    MeStrMap map = { 0 };
    int rc = 0;
    for (int s = 0; s < g->nscopes && rc >= 0; s++) rc = me_strmap_put(&map, g->scopes[s].name, s);
    for (int i = 0; i < g->nn && rc >= 0; i++) {
        const char *name = scoped_of(oc, i) ? scoped_of(oc, i) : g->n[i].name, *mod = g->n[i].module;
        if (!name || name[0] != '/' || !mod || mod == name) continue;
        /* mod is name's segments joined, the led ones stripped (module_name):
         * walk both, o the length of mod written so far */
        const char *seg = name + 1, *prev = NULL;
        size_t prev_len = 0, o = 0;
        for (const char *slash; (slash = strchr(seg, '/')); seg = slash + 1) {
            size_t sl = (size_t)(slash - seg);
            if (!sl) continue;
            bool led = prev && sl > prev_len + 1 && !strncmp(seg, prev, prev_len) && seg[prev_len] == '.';
            const char *add = led ? seg + prev_len + 1 : seg;
            size_t add_len = led ? sl - prev_len - 1 : sl, base = o ? o + 1 : 0;
            for (size_t k = 0; k < add_len && !led; k++) {
                if (add[k] != '.') continue;
                int s = me_strmap_get_n(&map, mod, base + k);
                if (s >= 0) g->scopes[s].uncalled = g->scopes[s].unseen_names = true;
            }
            o = base + add_len;
            prev = seg;
            prev_len = sl;
        }
    }
    me_strmap_free(&map);
    return rc < 0 ? ME_ENOMEM : 0;
}

/* In a file whose nodes state their module calls (a torch.export-based
 * export), a node without that metadata was added by the exporter's own
 * passes, not by a module: an op of the root forward, as TorchScript's
 * "/Constant" would be, rather than a module named after the node. */
static int unscoped_nodes(OCtx *o)
{
    if (!o->cap_scoped) return 0;
    MeGraph *g = o->g;
    for (int i = 0; i < g->nn; i++) {
        MeNode *n = &g->n[i];
        if (scoped_of(o, i) || !n->name || strchr(n->name, '/')) continue; /* '/': a function body's, named under its call */
        if (!(n->module = me_torch_root_name(g, n->name))) return ME_ENOMEM;
    }
    return 0;
}

/* A small message of the ModelProto (OperatorSetIdProto,
 * StringStringEntryProto) unpacked; NULL with *rc 0: corrupt. */
static ProtobufCMessage *unpack_field(OCtx *o, const PbField *f, const ProtobufCMessageDescriptor *d, int *rc)
{
    const uint8_t *data;
    uint8_t *p;
    if ((*rc = read_message(o, f, &data, &p)) < 0) return NULL;
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, (size_t)f->len, data);
    me_free(p);
    return m;
}

/* ModelProto: opset, local functions, metadata, then the graph. */
static int load_model(OCtx *o, const char *path)
{
    uint64_t cur = 0, end = o->r->size, graph_off = 0, graph_len = 0;
    bool has_graph = false, any = false;
    PbField f;
    int r;
    int64_t opset = -1;
    char producer[65] = "", version[65] = "";
    while ((r = pb_next(o->r, &cur, end, &f)) > 0) {
        any = true;
        if (f.num == 7 && f.wt == 2) {
            has_graph = true;
            graph_off = f.off;
            graph_len = f.len;
        } else if (f.num == 8 && f.wt == 2) {
            int rr;
            Onnx__OperatorSetIdProto *op = (Onnx__OperatorSetIdProto *)unpack_field(o, &f, &onnx__operator_set_id_proto__descriptor, &rr);
            if (rr < 0) return rr;
            if (!op) return bad(o, "opset_import");
            if (!op->domain || !*op->domain || !strcmp(op->domain, "ai.onnx")) opset = op->has_version ? op->version : -1;
            onnx__operator_set_id_proto__free_unpacked(op, NULL);
        } else if (f.num == 25 && f.wt == 2) {
            if (o->nfn >= 65536) return bad(o, "functions");
            Func *nf = me_realloc(o->fn, sizeof(Func) * (size_t)(o->nfn + 1));
            if (!nf) return ME_ENOMEM;
            o->fn = nf;
            memset(&o->fn[o->nfn], 0, sizeof(Func));
            int rr = load_function(o, &f, &o->fn[o->nfn++]);
            if (rr < 0) return rr;
        } else if ((f.num == 2 || f.num == 3) && f.wt == 2 && f.len <= 64) {
            /* producer_name, producer_version: torch.onnx writes "pytorch"
             * and torch.__version__ (torch/onnx/utils.py, _export; the
             * torch.export-based exporter the same) */
            const uint8_t *data;
            uint8_t *buf;
            int rr = read_message(o, &f, &data, &buf);
            if (rr < 0) return rr;
            char *dst = f.num == 2 ? producer : version;
            memcpy(dst, data, (size_t)f.len);
            dst[f.len] = 0;
            me_free(buf);
        } else if (f.num == 14 && f.wt == 2) { /* metadata_props */
            int rr;
            Onnx__StringStringEntryProto *e = (Onnx__StringStringEntryProto *)unpack_field(o, &f, &onnx__string_string_entry_proto__descriptor, &rr);
            if (rr < 0) return rr;
            if (!e) return bad(o, "metadata_props");
            if (e->key && e->value && !strcmp(e->key, ME_TORCH_SIGNATURE) && !o->signature && !(o->signature = me_strdup(e->value))) rr = ME_ENOMEM;
            onnx__string_string_entry_proto__free_unpacked(e, NULL);
            if (rr < 0) return rr;
        } else if (f.num == 7 || f.num == 8) {
            return bad(o, "model field");
        }
    }
    if (r < 0 || !any) return bad(o, "model");
    if (!has_graph) return me_error(o->d, ME_EINVAL, "%s: not an ONNX model: no graph", path);
    if (opset < 1) return me_error(o->d, ME_EINVAL, "%s: opset_import names no version for the default ONNX domain", path);
    if (opset > ME_ONNX_MAX_OPSET)
        return me_error(o->d, ME_EINVAL, "%s: opset %lld is newer than memest knows (up to %d)", path, (long long)opset, ME_ONNX_MAX_OPSET);
    o->g->opset = (int)opset;
    int rc = load_graph(o, graph_off, graph_len);
    if (rc >= 0 && o->signature) me_torch_signature(o->g, o->signature, strlen(o->signature));
    if (rc >= 0 && !strcmp(producer, "pytorch") && version[0]) rc = me_torch_version(o->g, version);
    return rc;
}

int me_open_regular(const char *file, const char *path, MeDiag *d)
{
    int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return me_error(d, ME_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return me_error(d, ME_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket" : "a special file";
        return me_error(d, ME_EINVAL, "%s: is %s, not a regular file; a model must be a regular file", path, what);
    }
    /* regular files never block; clear the flag so reads behave as usual */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int me_load_onnx(MeGraph *g, const MeSource *src, MeDiag *d)
{
    const char *path = g->path;
    int fd = -1;
    uint64_t size = src->len;
    if (!src->data) {
        if ((fd = me_open_regular(src->path, path, d)) < 0) return fd;
        struct stat st;
        if (fstat(fd, &st) < 0) {
            close(fd);
            return me_error(d, ME_EIO, "%s: cannot stat: %s", path, strerror(errno));
        }
        size = (uint64_t)st.st_size;
    }
    if (size == 0) {
        if (fd >= 0) close(fd);
        return me_error(d, ME_EINVAL, "%s: the file is empty", path);
    }
    Reader *rd = me_calloc(1, sizeof(*rd));
    if (!rd || (fd >= 0 && !(rd->buf = me_malloc(RD_WINDOW)))) {
        me_free(rd);
        if (fd >= 0) close(fd);
        return ME_ENOMEM;
    }
    rd->fd = fd;
    rd->mem = src->data;
    rd->size = size;
    g->loader = rd; /* kept (a file open): initializer contents are read on demand */
    g->loader_free = reader_free;

    OCtx o = { .g = g, .d = d, .r = rd, .threads = src->threads };
    int rc = load_model(&o, path);
    free_functions(&o);
    me_free(o.gen);
    me_free(o.subw);
    me_free(o.cap_mark);
    me_free(o.signature);
    me_torch_scopes_free(&o.ts);
    if (rc >= 0) rc = unscoped_nodes(&o);
    if (rc >= 0 && !o.cap_scoped) rc = repoint_calls(g);
    if (rc >= 0) rc = mark_functional(g);
    g->frames_unseen = true; /* an export keeps no Python names */
    if (rc >= 0) rc = mark_uncalled(g, &o);
    me_free(o.scoped);
    return rc;
}

void me_onnx_detach(MeGraph *g)
{
    if (g->loader_free != reader_free || !g->loader) return;
    ((Reader *)g->loader)->mem = NULL;
}
