#include <stdbool.h>
#include <string.h>

#include "allocator.h"
#include "timeline.h"
#include "util.h"

#define MIN_BLOCK      512u
#define SMALL_SIZE     (UINT64_C(1) << 20)         /* largest "small" request */
#define SMALL_BUFFER   (UINT64_C(2) << 20)         /* small pool segment */
#define LARGE_BUFFER   (UINT64_C(20) << 20)        /* segment for 1–10 MiB requests */
#define MIN_LARGE      (UINT64_C(10) << 20)
#define ROUND_LARGE    (UINT64_C(2) << 20)

/* Blocks form a doubly linked list per segment (address order). Free
 * blocks are ordered by (size, index) as PyTorch's ordered set of blocks
 * orders them by size: best fit takes the first at or above the request.
 * Graphs with a million nodes keep hundreds of thousands of free blocks,
 * so the order is indexed. Small-pool blocks (at most a 2 MiB segment)
 * fall into 4,096 exact sizes: a bitmap finds the first non-empty size and
 * a min-heap per size the lowest index. Large-pool blocks, of unbounded
 * sizes, are kept in a treap. */
#define SMALL_CLASSES  (SMALL_BUFFER / MIN_BLOCK + 1)
#define SMALL_WORDS    ((SMALL_CLASSES + 63) / 64)
typedef struct Block {
    uint64_t size;
    uint64_t req;    /* bytes asked for */
    int prev, next;  /* neighbours in the segment, -1 none */
    int handle;
    union {
        struct { int left, right; uint32_t prio; }; /* large pool: treap node */
        int hpos;    /* small pool: position in its size's heap */
    };
    bool small, free;
} Block;

typedef struct Heap {
    int *a;
    int n, cap;
} Heap;

struct MeAllocator {
    Block *b;
    int nb, cap;
    int *handle_block;  /* handle → block */
    int hcap;
    int *spare;         /* recycled block slots */
    int nspare, spare_cap;
    int root;           /* large pool: treap of free blocks */
    Heap cls[SMALL_CLASSES];       /* small pool: free blocks by size / 512 */
    uint64_t bits[SMALL_WORDS];    /* sizes whose heap is not empty */
    uint32_t seed;
    MeAllocStats st;
};

static bool before(const MeAllocator *a, int x, int y)
{
    return a->b[x].size < a->b[y].size || (a->b[x].size == a->b[y].size && x < y);
}

/* split t into keys before k (l) and the rest (r) */
static void split(MeAllocator *a, int t, int k, int *l, int *r)
{
    if (t < 0) { *l = *r = -1; return; }
    if (before(a, t, k)) {
        split(a, a->b[t].right, k, &a->b[t].right, r);
        *l = t;
    } else {
        split(a, a->b[t].left, k, l, &a->b[t].left);
        *r = t;
    }
}

static int merge_treap(MeAllocator *a, int l, int r)
{
    if (l < 0) return r;
    if (r < 0) return l;
    if (a->b[l].prio > a->b[r].prio) {
        a->b[l].right = merge_treap(a, a->b[l].right, r);
        return l;
    }
    a->b[r].left = merge_treap(a, l, a->b[r].left);
    return r;
}

/* --- small pool: a min-heap of block indices per size --- */

static void heap_set(MeAllocator *a, Heap *h, int pos, int blk)
{
    h->a[pos] = blk;
    a->b[blk].hpos = pos;
}

static void heap_sift(MeAllocator *a, Heap *h, int pos)
{
    int blk = h->a[pos];
    while (pos > 0 && h->a[(pos - 1) / 2] > blk) {
        heap_set(a, h, pos, h->a[(pos - 1) / 2]);
        pos = (pos - 1) / 2;
    }
    for (;;) {
        int c = 2 * pos + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->a[c + 1] < h->a[c]) c++;
        if (h->a[c] > blk) break;
        heap_set(a, h, pos, h->a[c]);
        pos = c;
    }
    heap_set(a, h, pos, blk);
}

static bool heap_push(MeAllocator *a, int i)
{
    size_t c = (size_t)(a->b[i].size / MIN_BLOCK);
    Heap *h = &a->cls[c];
    if (me_grow_raw(&h->a, &h->cap, h->n + 1, sizeof(int)) < 0) return false;
    h->n++;
    heap_set(a, h, h->n - 1, i);
    heap_sift(a, h, h->n - 1);
    a->bits[c / 64] |= UINT64_C(1) << (c % 64);
    return true;
}

static void heap_erase(MeAllocator *a, int i)
{
    size_t c = (size_t)(a->b[i].size / MIN_BLOCK);
    Heap *h = &a->cls[c];
    int pos = a->b[i].hpos;
    if (pos >= h->n || h->a[pos] != i) return;
    if (--h->n > pos) {
        heap_set(a, h, pos, h->a[h->n]);
        heap_sift(a, h, pos);
    }
    if (!h->n) a->bits[c / 64] &= ~(UINT64_C(1) << (c % 64));
}

static int heap_best_fit(const MeAllocator *a, uint64_t size)
{
    size_t c = (size_t)(size / MIN_BLOCK);
    if (c >= SMALL_CLASSES) return -1;
    size_t w = c / 64;
    uint64_t word = a->bits[w] & (~UINT64_C(0) << (c % 64));
    while (!word) {
        if (++w >= SMALL_WORDS) return -1;
        word = a->bits[w];
    }
    return a->cls[w * 64 + (size_t)__builtin_ctzll(word)].a[0];
}

/* --- large pool: a treap --- */

static void treap_insert(MeAllocator *a, int i)
{
    int l, r;
    a->seed = a->seed * 1664525u + 1013904223u;
    a->b[i].prio = a->seed;
    a->b[i].left = a->b[i].right = -1;
    split(a, a->root, i, &l, &r);
    a->root = merge_treap(a, merge_treap(a, l, i), r);
}

static void treap_erase(MeAllocator *a, int i)
{
    int *t = &a->root;
    while (*t >= 0 && *t != i) t = before(a, i, *t) ? &a->b[*t].left : &a->b[*t].right;
    if (*t == i) *t = merge_treap(a, a->b[i].left, a->b[i].right);
}

static int treap_best_fit(const MeAllocator *a, uint64_t size)
{
    int t = a->root, best = -1;
    while (t >= 0) {
        if (a->b[t].size >= size) { best = t; t = a->b[t].left; }
        else t = a->b[t].right;
    }
    return best;
}

static bool free_insert(MeAllocator *a, int i)
{
    if (a->b[i].small) return heap_push(a, i);
    treap_insert(a, i);
    return true;
}

static void free_erase(MeAllocator *a, int i)
{
    if (a->b[i].small) heap_erase(a, i);
    else treap_erase(a, i);
}

/* smallest free block of the pool with size >= size */
static int best_fit(const MeAllocator *a, bool small, uint64_t size)
{
    return small ? heap_best_fit(a, size) : treap_best_fit(a, size);
}

uint64_t me_allocator_round(uint64_t bytes)
{
    if (bytes < MIN_BLOCK) return MIN_BLOCK;
    return (bytes + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
}

int me_allocator_new(MeAllocator **out)
{
    *out = me_calloc(1, sizeof(MeAllocator));
    if (!*out) return ME_ENOMEM;
    (*out)->root = -1;
    (*out)->seed = 12345u; /* deterministic */
    return 0;
}

void me_allocator_free(MeAllocator *a)
{
    if (!a) return;
    for (size_t c = 0; c < SMALL_CLASSES; c++) me_free(a->cls[c].a);
    me_free(a->b);
    me_free(a->handle_block);
    me_free(a->spare);
    me_free(a);
}

static int new_block(MeAllocator *a)
{
    if (a->nspare) return a->spare[--a->nspare];
    if (me_grow_raw(&a->b, &a->cap, a->nb + 1, sizeof(Block)) < 0) return -1;
    return a->nb++;
}

static void drop_block(MeAllocator *a, int i)
{
    if (me_grow(&a->spare, &a->spare_cap, a->nspare + 1, sizeof(int)) == 0) a->spare[a->nspare++] = i;
    a->b[i].size = 0;
    a->b[i].free = false;
}

int me_allocator_malloc(MeAllocator *a, int handle, uint64_t bytes)
{
    if (handle < 0) return ME_EINVAL;
    if (handle >= a->hcap) {
        int old = a->hcap;
        if (me_grow(&a->handle_block, &a->hcap, handle + 1, sizeof(int)) < 0) return ME_ENOMEM;
        for (int i = old; i < a->hcap; i++) a->handle_block[i] = -1;
    }
    uint64_t size = me_allocator_round(bytes);
    bool small = size <= SMALL_SIZE;
    /* best fit among free blocks of the same pool */
    int best = best_fit(a, small, size);
    if (best >= 0) free_erase(a, best);
    if (best < 0) {
        uint64_t seg = small ? SMALL_BUFFER : size < MIN_LARGE ? LARGE_BUFFER : (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
        best = new_block(a);
        if (best < 0) return ME_ENOMEM;
        a->st.segments++;
        a->b[best] = (Block){ .size = seg, .small = small, .free = true,
                              .prev = -1, .next = -1, .handle = -1 };
        a->st.reserved += seg;
        if (a->st.reserved > a->st.peak_reserved) a->st.peak_reserved = a->st.reserved;
    }
    uint64_t remain = a->b[best].size - size;
    if (small ? remain >= MIN_BLOCK : remain > SMALL_SIZE) {
        int r = new_block(a);
        if (r < 0) return ME_ENOMEM;
        Block *k = &a->b[best];
        a->b[r] = (Block){ .size = remain, .small = k->small,
                           .free = true, .prev = best, .next = k->next, .handle = -1 };
        if (k->next >= 0) a->b[k->next].prev = r;
        k->next = r;
        k->size = size;
        if (!free_insert(a, r)) return ME_ENOMEM;
    }
    Block *k = &a->b[best];
    k->free = false;
    k->handle = handle;
    k->req = bytes;
    a->handle_block[handle] = best;
    /* memory_allocated counts the whole block, remainder too when not split */
    a->st.allocated += k->size;
    a->st.requested += bytes;
    if (a->st.allocated > a->st.peak_allocated) a->st.peak_allocated = a->st.allocated;
    if (a->st.requested > a->st.peak_requested) a->st.peak_requested = a->st.requested;
    return 0;
}

/* left absorbs right; both out of the free index (left is re-added by the
 * caller; the block being released is not in it) */
static void merge(MeAllocator *a, int left, int right)
{
    if (a->b[left].free) free_erase(a, left);
    if (a->b[right].free) free_erase(a, right);
    Block *l = &a->b[left], *r = &a->b[right];
    l->size += r->size;
    l->next = r->next;
    if (r->next >= 0) a->b[r->next].prev = left;
    drop_block(a, right);
}

int me_allocator_release(MeAllocator *a, int handle)
{
    if (handle < 0 || handle >= a->hcap || a->handle_block[handle] < 0) return ME_EINVAL;
    int i = a->handle_block[handle];
    a->handle_block[handle] = -1;
    Block *k = &a->b[i];
    a->st.allocated -= k->size;
    a->st.requested -= k->req;
    k->handle = -1;
    k->free = false; /* not in the index yet */
    if (k->next >= 0 && a->b[k->next].free) merge(a, i, k->next);
    if (a->b[i].prev >= 0 && a->b[a->b[i].prev].free) {
        int p = a->b[i].prev;
        merge(a, p, i);
        i = p;
    }
    a->b[i].free = true;
    return free_insert(a, i) ? 0 : ME_ENOMEM;
}

const MeAllocStats *me_allocator_stats(const MeAllocator *a) { return &a->st; }

/* Fed by the timeline (timeline.h): a storage is a handle. */
int me_allocator_event(void *opaque, const MeTlEvent *e)
{
    /* paged optimizer state is cudaMallocManaged memory (bitsandbytes'
     * F.get_paged), never a block of the cache: device memory while
     * resident, counted as such (no rounding, no caching) */
    if (e->cat == MEMEST_MEM_OPTIMIZER_PAGED && (e->kind == ME_TL_ALLOC || e->kind == ME_TL_FREE)) {
        MeAllocator *a = opaque;
        uint64_t b = (uint64_t)e->bytes;
        if (e->kind == ME_TL_FREE) {
            a->st.allocated -= b, a->st.reserved -= b;
            return 0;
        }
        a->st.allocated += b, a->st.reserved += b;
        if (a->st.allocated > a->st.peak_allocated) a->st.peak_allocated = a->st.allocated;
        if (a->st.reserved > a->st.peak_reserved) a->st.peak_reserved = a->st.reserved;
        return 0;
    }
    if (e->kind == ME_TL_ALLOC) return me_allocator_malloc(opaque, e->storage, (uint64_t)e->bytes);
    if (e->kind == ME_TL_FREE) return me_allocator_release(opaque, e->storage);
    return 0;
}
