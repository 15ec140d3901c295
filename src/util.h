/* Small shared helpers: allocation through replaceable hooks, overflow-checked
 * 64-bit arithmetic, diagnostics and a string → int map. */
#ifndef MEMEST_UTIL_H
#define MEMEST_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "memest/memest.h"

/* Error codes used everywhere inside the library: the public MemestError
 * values under short names, so the two can never disagree. */
enum {
    ME_OK = MEMEST_OK,
    ME_EINVAL = MEMEST_ERR_INVALID,         /* bad input: file, shape, attribute, option */
    ME_ENOMEM = MEMEST_ERR_NOMEM,
    ME_EIO = MEMEST_ERR_IO,
    ME_EUNSUPPORTED = MEMEST_ERR_UNSUPPORTED, /* an op the registry does not know (strict mode) */
    ME_ESTALE = MEMEST_ERR_STALE,           /* an analysis of an earlier binding */
};

void *me_malloc(size_t size);
/* Whether memest_set_allocator installed hooks (which need not be
 * thread-safe: memest then stays on one thread). */
bool me_alloc_hooked(void);
void *me_calloc(size_t n, size_t size);
void *me_realloc(void *p, size_t size);
void me_free(void *p);
char *me_strdup(const char *s);
char *me_strndup(const char *s, size_t n);
/* Faults in up to 8 big regions about to be filled, on a helper thread,
 * while the caller goes on filling them: first touches of fresh memory are
 * slow on virtual machines. NULL when nothing was started; join before
 * the regions may be freed or moved. */
typedef struct MePrefault MePrefault;
MePrefault *me_prefault_start(void *const *p, const size_t *len, int n);
void me_prefault_join(MePrefault *pf);
/* Grows *arr (of *cap elements of size elsz) to hold at least need elements. */
int me_grow(void *arr, int *cap, int need, size_t elsz);
/* The same without zeroing the new room: for arrays whose every new
 * element is set whole by the caller (untouched room costs no memory). */
int me_grow_raw(void *arr, int *cap, int need, size_t elsz);

/* Overflow-checked arithmetic: return false when the result does not fit. */
static inline bool me_mul64(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline bool me_add64(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline bool me_umul64(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_mul_overflow(a, b, r); }
/* Saturating unsigned add/mul for cost counters: a count that overflows 2^64
 * is reported as UINT64_MAX rather than wrapping. */
static inline uint64_t me_sadd(uint64_t a, uint64_t b) { uint64_t r; return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r; }
static inline uint64_t me_smul(uint64_t a, uint64_t b) { uint64_t r; return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r; }

/* A name table indexed by an enum (the public *_name / *_from_name pairs):
 * names[i], "?" out of range; the index of name, -1 if absent. */
static inline const char *me_name_of(const char *const *names, int n, int i) { return i >= 0 && i < n ? names[i] : "?"; }
static inline int me_name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (names[i] && !strcmp(names[i], name)) return i;
    return -1;
}

/* The length of name before suffix when name ends in it and is longer,
 * else 0 (a module's path from a tensor's "<module>.weight") */
static inline size_t me_prefix_len(const char *name, const char *suffix)
{
    size_t ln = name ? strlen(name) : 0, ls = strlen(suffix);
    return ln > ls && !strcmp(name + ln - ls, suffix) ? ln - ls : 0;
}

/* Decimal text of v into buf (21 / 22 bytes suffice); returns its length. */
size_t me_u64_str(uint64_t v, char *buf);
size_t me_i64_str(int64_t v, char *buf);

/* Diagnostics: the library never prints; the first error is kept here. */
typedef struct MeDiag {
    char msg[1024];
    int code;
} MeDiag;

#ifdef __GNUC__
#define ME_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ME_PRINTF(a, b)
#endif

/* Records an error (only the first one sticks) and returns code. The text
 * is escaped with me_escape: messages quote names from model files, and
 * they end up on terminals. */
int me_error(MeDiag *d, int code, const char *fmt, ...) ME_PRINTF(3, 4);

/* s (NULL: "") with what a terminal would act on made visible: C0 controls,
 * DEL and C1 controls (U+0080..U+009F) as \n, \t, \r, \e, \xHH or \uHHHH,
 * and the backslash doubled so the escapes cannot be forged. Cut at a whole
 * character to fit buf of n > 0 bytes; returns buf. */
char *me_escape(const char *s, char *buf, size_t n);
/* Whether me_escape would change s. */
bool me_needs_escape(const char *s);

/* True when s is well-formed UTF-8 (names end up in JSON reports); the
 * _n form also rejects NUL bytes inside. */
bool me_utf8_valid(const char *s);
bool me_utf8_valid_n(const char *s, size_t len);

/* Bump allocator for the many small objects of a graph (names, edge
 * lists) that live as long as it: no per-object header, one free. */
typedef struct MeArena {
    struct MeArenaChunk *chunks;
    char *cur;
    size_t left, next_chunk;
} MeArena;

void *me_arena_alloc(MeArena *a, size_t size); /* 8-byte aligned */
/* Makes the current chunk hold at least size more bytes; returns its free
 * room (for prefaulting) or NULL. */
void *me_arena_reserve(MeArena *a, size_t size);
char *me_arena_strndup(MeArena *a, const char *s, size_t n);
char *me_arena_strdup(MeArena *a, const char *s);
void me_arena_free(MeArena *a);

/* Open-addressing map from string to int; keys are borrowed, not copied.
 * Each slot keeps the key's hash beside it, so a probe reads the key's
 * bytes only on a hash match and growing never rehashes a string. */
typedef struct MeStrSlot {
    const char *key;
    uint32_t hash;
    int val;
} MeStrSlot;

typedef struct MeStrMap {
    MeStrSlot *slots;
    uint32_t cap, count;
} MeStrMap;

int me_strmap_put(MeStrMap *m, const char *key, int val); /* replaces */
int me_strmap_reserve(MeStrMap *m, uint32_t n);            /* room for n keys */
/* Starts loading key's slot into the cache: a big map is a cache miss per
 * lookup, which a loop can overlap by asking a few keys ahead. */
void me_strmap_prefetch_n(const MeStrMap *m, const char *key, size_t len);
int me_strmap_get(const MeStrMap *m, const char *key);    /* -1 if absent */
int me_strmap_get_n(const MeStrMap *m, const char *key, size_t len); /* key[0..len), no NUL inside */
void me_strmap_free(MeStrMap *m);

#endif
