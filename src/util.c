#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#include <pthread.h>

#ifdef __linux__
#include <sys/mman.h>
#endif

/* Allocation goes through hooks so tests can make any allocation fail. */
static MemestAllocator g_alloc;

void memest_set_allocator(const MemestAllocator *a)
{
    if (a)
        g_alloc = *a;
    else
        memset(&g_alloc, 0, sizeof(g_alloc));
}

bool me_alloc_hooked(void) { return g_alloc.malloc_fn || g_alloc.realloc_fn || g_alloc.free_fn; }

void memest_free(void *p) { me_free(p); }

const char *memest_strerror(int code)
{
    switch ((MemestError)code) {
    case MEMEST_OK: return "success";
    case MEMEST_ERR_IO: return "input/output error";
    case MEMEST_ERR_NOMEM: return "out of memory";
    case MEMEST_ERR_INVALID: return "invalid input or usage";
    case MEMEST_ERR_UNSUPPORTED: return "unsupported operator";
    case MEMEST_ERR_STALE: return "the analysis is of an earlier binding of its model";
    }
    return "unknown error";
}

const char *memest_version(void) { return MEMEST_VERSION_STRING; }

/* Arrays of a million-node graph run to hundreds of MB, first touched
 * one 4 KiB page fault at a time; transparent huge pages (where the
 * system leaves them to madvise) cut the faults 512-fold. */
static void *huge_hint(void *p, size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = UINTMAX_C(2) << 20;
    if (p && size >= 4 * huge) {
        uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + size) & ~(huge - 1);
        if (e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#else
    (void)size;
#endif
    return p;
}

/* --- prefaulting on a helper thread --- */

#define PREFAULT_MAX 8

struct MePrefault {
    pthread_t th;
    void *p[PREFAULT_MAX];
    size_t len[PREFAULT_MAX];
    int n;
};

static void *prefault_run(void *arg)
{
    MePrefault *pf = arg;
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    const uintptr_t page = 4096;
    for (int i = 0; i < pf->n; i++) {
        uintptr_t a = ((uintptr_t)pf->p[i] + page - 1) & ~(page - 1), e = ((uintptr_t)pf->p[i] + pf->len[i]) & ~(page - 1);
        /* page tables only: no byte is written, so the caller may fill
         * the same memory meanwhile */
        if (e > a) madvise((void *)a, e - a, MADV_POPULATE_WRITE);
    }
#endif
    return NULL;
}

MePrefault *me_prefault_start(void *const *p, const size_t *len, int n)
{
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    if (me_alloc_hooked() || n <= 0 || n > PREFAULT_MAX) return NULL;
    MePrefault *pf = malloc(sizeof(*pf));
    if (!pf) return NULL;
    pf->n = n;
    for (int i = 0; i < n; i++) {
        pf->p[i] = p[i];
        pf->len[i] = p[i] ? len[i] : 0;
    }
    if (pthread_create(&pf->th, NULL, prefault_run, pf) != 0) {
        free(pf);
        return NULL;
    }
    return pf;
#else
    (void)p; (void)len; (void)n;
    return NULL;
#endif
}

void me_prefault_join(MePrefault *pf)
{
    if (!pf) return;
    pthread_join(pf->th, NULL);
    free(pf);
}

void *me_malloc(size_t size)
{
    if (!size) size = 1;
    return g_alloc.malloc_fn ? g_alloc.malloc_fn(g_alloc.opaque, size) : huge_hint(malloc(size), size);
}

void *me_realloc(void *p, size_t size)
{
    if (!size) size = 1;
    return g_alloc.realloc_fn ? g_alloc.realloc_fn(g_alloc.opaque, p, size) : huge_hint(realloc(p, size), size);
}

void me_free(void *p)
{
    if (!p) return;
    if (g_alloc.free_fn) g_alloc.free_fn(g_alloc.opaque, p);
    else free(p);
}

void *me_calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) return NULL;
    if (!g_alloc.malloc_fn) return huge_hint(calloc(total ? total : 1, 1), total); /* fresh pages are zero already */
    void *p = me_malloc(total);
    if (p) memset(p, 0, total);
    return p;
}

char *me_strndup(const char *s, size_t n)
{
    char *r = me_malloc(n + 1);
    if (!r) return NULL;
    if (n) memcpy(r, s, n); /* s may be NULL for an empty string */
    r[n] = 0;
    return r;
}

char *me_strdup(const char *s)
{
    return me_strndup(s, strlen(s));
}

int me_grow_raw(void *arr, int *cap, int need, size_t elsz)
{
    void **pa = arr;
    if (need <= *cap) return 0;
    if (need > (1 << 30)) return ME_ENOMEM;
    int ncap = *cap ? *cap : 8;
    while (ncap < need) ncap *= 2;
    void *p = me_realloc(*pa, (size_t)ncap * elsz);
    if (!p) return ME_ENOMEM;
    *pa = p;
    *cap = ncap;
    return 0;
}

int me_grow(void *arr, int *cap, int need, size_t elsz)
{
    int old = *cap;
    if (need <= old) return 0;
    int rc = me_grow_raw(arr, cap, need, elsz);
    if (rc == 0) memset(*(char **)arr + (size_t)old * elsz, 0, (size_t)(*cap - old) * elsz);
    return rc;
}

size_t me_u64_str(uint64_t v, char *buf)
{
    char tmp[20];
    size_t n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
    buf[n] = 0;
    return n;
}

size_t me_i64_str(int64_t v, char *buf)
{
    if (v >= 0) return me_u64_str((uint64_t)v, buf);
    buf[0] = '-';
    return 1 + me_u64_str(-(uint64_t)v, buf + 1);
}


/* The escape for the character at p (len bytes), or NULL when it stands
 * for itself. */
static const char *escape_of(const unsigned char *p, size_t *len, char tmp[8])
{
    *len = 1;
    if (*p == '\\') return "\\\\";
    if (*p < 0x20 || *p == 0x7f) {
        switch (*p) {
        case '\n': return "\\n";
        case '\t': return "\\t";
        case '\r': return "\\r";
        case 0x1b: return "\\e";
        default: snprintf(tmp, 8, "\\x%02x", *p); return tmp;
        }
    }
    if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* C1: CSI is U+009B */
        *len = 2;
        snprintf(tmp, 8, "\\u%04x", p[1]);
        return tmp;
    }
    return NULL;
}

bool me_needs_escape(const char *s)
{
    char tmp[8];
    size_t len;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
        if (escape_of(p, &len, tmp)) return true;
    return false;
}

char *me_escape(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    char tmp[8];
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        size_t len;
        const char *e = escape_of(p, &len, tmp);
        size_t el = e ? strlen(e) : 1;
        /* a multi-byte character is kept whole: count its continuation bytes */
        if (!e && *p >= 0xc0)
            while (p[el] && (p[el] & 0xc0) == 0x80 && el < 4) el++;
        if (o + el >= n) break;
        memcpy(buf + o, e ? e : (const char *)p, el);
        o += el;
        p += e ? len : el;
    }
    buf[o] = 0;
    return buf;
}

int me_error(MeDiag *d, int code, const char *fmt, ...)
{
    if (d && !d->code) {
        char raw[sizeof(d->msg)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof(raw), fmt, ap);
        va_end(ap);
        me_escape(raw, d->msg, sizeof(d->msg));
        d->code = code;
    }
    return code;
}

static uint32_t hash_n(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h ^ (h >> 15); /* the table indexes by the low bits */
}

/* The slot holding key[0..len) (no NUL inside), or the empty slot where it
 * would go. strncmp stops at a shorter stored key's NUL. */
static MeStrSlot *strmap_find(const MeStrMap *m, const char *key, size_t len, uint32_t h)
{
    uint32_t mask = m->cap - 1, j = h & mask;
    for (;; j = (j + 1) & mask) {
        MeStrSlot *s = &m->slots[j];
        if (!s->key || (s->hash == h && !strncmp(s->key, key, len) && !s->key[len])) return s;
    }
}

static int strmap_rehash(MeStrMap *m, uint32_t ncap)
{
    MeStrSlot *ns = me_calloc(ncap, sizeof(*ns));
    if (!ns) return ME_ENOMEM;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        uint32_t j = m->slots[i].hash & (ncap - 1);
        while (ns[j].key) j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    me_free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int me_strmap_reserve(MeStrMap *m, uint32_t n)
{
    /* growing a big map re-inserts every key at a random place: size it once */
    if (n > (1u << 29)) return ME_ENOMEM;
    uint32_t cap = 64;
    while (cap < 2 * n) cap *= 2;
    return cap > m->cap ? strmap_rehash(m, cap) : 0;
}

int me_strmap_put(MeStrMap *m, const char *key, int val)
{
    if ((m->count + 1) * 2 > m->cap) {
        uint32_t ncap = m->cap ? m->cap * 2 : 64;
        if (ncap < m->cap || strmap_rehash(m, ncap) < 0) return ME_ENOMEM;
    }
    size_t len = strlen(key);
    uint32_t h = hash_n(key, len);
    MeStrSlot *s = strmap_find(m, key, len, h);
    if (!s->key) {
        s->key = key;
        s->hash = h;
        m->count++;
    }
    s->val = val;
    return 0;
}

int me_strmap_get_n(const MeStrMap *m, const char *key, size_t len)
{
    if (!m->cap) return -1;
    const MeStrSlot *s = strmap_find(m, key, len, hash_n(key, len));
    return s->key ? s->val : -1;
}

void me_strmap_prefetch_n(const MeStrMap *m, const char *key, size_t len)
{
    if (m->cap) __builtin_prefetch(&m->slots[hash_n(key, len) & (m->cap - 1)]);
}

int me_strmap_get(const MeStrMap *m, const char *key) { return me_strmap_get_n(m, key, strlen(key)); }

void me_strmap_free(MeStrMap *m)
{
    me_free(m->slots);
    memset(m, 0, sizeof(*m));
}

bool me_utf8_valid_n(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        if (!*p) return false; /* names end up as C strings */
        int n = *p < 0x80 ? 0 : (*p >> 5) == 6 ? 1 : (*p >> 4) == 14 ? 2 : (*p >> 3) == 30 ? 3 : -1;
        if (n < 0 || end - p <= n) return false;
        /* no overlong two-byte forms, nothing above U+10FFFF */
        if ((n == 1 && *p < 0xc2) || (n == 3 && *p > 0xf4)) return false;
        p++;
        for (int i = 0; i < n; i++, p++)
            if ((*p >> 6) != 2) return false;
    }
    return true;
}

bool me_utf8_valid(const char *s)
{
    return me_utf8_valid_n(s, strlen(s));
}

/* --- arena --- */

struct MeArenaChunk {
    struct MeArenaChunk *next;
    max_align_t data[];
};

/* chunks double from 64 KiB to 16 MiB: small graphs stay small, big ones
 * get few chunks (and huge pages) */
#define ARENA_FIRST (64u << 10)
#define ARENA_LAST (16u << 20)

void *me_arena_alloc(MeArena *a, size_t size)
{
    size = (size + 7) & ~(size_t)7;
    if (!size) size = 8;
    if (size > a->left) {
        size_t chunk = a->next_chunk ? a->next_chunk : ARENA_FIRST;
        size_t want = size > chunk / 4 ? size : chunk;
        if (want > SIZE_MAX - sizeof(struct MeArenaChunk)) return NULL;
        struct MeArenaChunk *c = me_malloc(sizeof(*c) + want);
        if (!c) return NULL;
        if (want != chunk) {
            /* a big request gets a chunk of its own; the current one stays open */
            c->next = a->chunks ? a->chunks->next : NULL;
            if (a->chunks) a->chunks->next = c;
            else a->chunks = c;
            return c->data;
        }
        c->next = a->chunks;
        a->chunks = c;
        a->cur = (char *)c->data;
        a->left = want;
        a->next_chunk = chunk < ARENA_LAST ? 2 * chunk : chunk;
    }
    void *p = a->cur;
    a->cur += size;
    a->left -= size;
    return p;
}

void *me_arena_reserve(MeArena *a, size_t size)
{
    if (a->left >= size) return a->cur;
    size = (size + 7) & ~(size_t)7;
    if (size > SIZE_MAX - sizeof(struct MeArenaChunk)) return NULL;
    struct MeArenaChunk *c = me_malloc(sizeof(*c) + size);
    if (!c) return NULL;
    c->next = a->chunks;
    a->chunks = c;
    a->cur = (char *)c->data;
    a->left = size;
    return a->cur;
}

char *me_arena_strndup(MeArena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX) return NULL;
    char *r = me_arena_alloc(a, n + 1);
    if (!r) return NULL;
    if (n) memcpy(r, s, n);
    r[n] = 0;
    return r;
}

char *me_arena_strdup(MeArena *a, const char *s) { return me_arena_strndup(a, s, strlen(s)); }

void me_arena_free(MeArena *a)
{
    for (struct MeArenaChunk *c = a->chunks, *nx; c; c = nx) {
        nx = c->next;
        me_free(c);
    }
    memset(a, 0, sizeof(*a));
}
