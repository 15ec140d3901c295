/* The caching-allocator model on sequences worked out by hand from the
 * rules in REFERENCE.md (CUDACachingAllocator.cpp). */
#include <stdio.h>

#include "allocator.h"

#define MiB (UINT64_C(1) << 20)

static int fails;

#define EXPECT(what, got, want)                                                                       \
    do {                                                                                             \
        if ((got) != (want)) {                                                                       \
            printf("FAIL %s: %llu, expected %llu\n", what, (unsigned long long)(got), (unsigned long long)(want)); \
            fails++;                                                                                 \
        }                                                                                            \
    } while (0)

int main(void)
{
    MeAllocator *a;
    const MeAllocStats *s;

    EXPECT("round 1", me_allocator_round(1), 512);
    EXPECT("round 512", me_allocator_round(512), 512);
    EXPECT("round 513", me_allocator_round(513), 1024);

    /* 1 B → a 512 B block carved from a new 2 MiB small segment */
    me_allocator_new(&a);
    s = me_allocator_stats(a);
    me_allocator_malloc(a, 0, 1);
    EXPECT("1 B allocated", s->allocated, 512);
    EXPECT("1 B reserved", s->reserved, 2 * MiB);
    /* exactly 1 MiB is still "small": the same segment has 2 MiB − 512 B free */
    me_allocator_malloc(a, 1, MiB);
    EXPECT("1 MiB allocated", s->allocated, 512 + MiB);
    EXPECT("1 MiB reserved", s->reserved, 2 * MiB);
    /* 1 MiB + 1 B → 1 MiB + 512 B, large pool, a new 20 MiB segment, split
     * (the remainder, ~19 MiB, is more than 1 MiB) */
    me_allocator_malloc(a, 2, MiB + 1);
    EXPECT("1 MiB+1 allocated", s->allocated, 512 + MiB + MiB + 512);
    EXPECT("1 MiB+1 reserved", s->reserved, 22 * MiB);
    /* 12 MiB: best fit is the 20 MiB segment's free remainder (19 MiB − 512 B),
     * so no new segment; 7 MiB − 512 B stay free after the split */
    me_allocator_malloc(a, 3, 12 * MiB);
    EXPECT("12 MiB reserved", s->reserved, 22 * MiB);
    EXPECT("12 MiB allocated", s->allocated, 512 + MiB + MiB + 512 + 12 * MiB);
    /* 8 MiB no longer fits anywhere: a new 20 MiB segment (request < 10 MiB) */
    me_allocator_malloc(a, 4, 8 * MiB);
    EXPECT("8 MiB reserved", s->reserved, 42 * MiB);
    /* freeing keeps the segments cached: reserved stays, allocated drops */
    for (int h = 0; h < 5; h++) me_allocator_release(a, h);
    EXPECT("all freed allocated", s->allocated, 0);
    EXPECT("all freed reserved", s->reserved, 42 * MiB);
    EXPECT("peak allocated", s->peak_allocated, 512 + MiB + MiB + 512 + 12 * MiB + 8 * MiB);
    EXPECT("peak reserved", s->peak_reserved, 42 * MiB);
    /* the freed blocks merged back: a whole 20 MiB request reuses a segment */
    me_allocator_malloc(a, 5, 20 * MiB);
    EXPECT("reuse reserved", s->reserved, 42 * MiB);
    me_allocator_free(a);

    /* 19.5 MiB: ≥ 10 MiB, so its own segment rounded up to 2 MiB: 20 MiB; the
     * 0.5 MiB remainder is not more than 1 MiB, so the block is not split and
     * memory_allocated counts all 20 MiB */
    me_allocator_new(&a);
    s = me_allocator_stats(a);
    me_allocator_malloc(a, 0, 19 * MiB + MiB / 2);
    EXPECT("unsplit allocated", s->allocated, 20 * MiB);
    EXPECT("unsplit reserved", s->reserved, 20 * MiB);
    EXPECT("unsplit requested", s->requested, 19 * MiB + MiB / 2);
    me_allocator_free(a);

    /* small blocks merge with free neighbours: A B C of 256 KiB; free B, A;
     * a 512 KiB request fits the merged hole at offset 0 (best fit: the hole
     * is 512 KiB, the segment's tail 1.25 MiB) */
    me_allocator_new(&a);
    s = me_allocator_stats(a);
    me_allocator_malloc(a, 0, 256 * 1024);
    me_allocator_malloc(a, 1, 256 * 1024);
    me_allocator_malloc(a, 2, 256 * 1024);
    me_allocator_release(a, 1);
    me_allocator_release(a, 0);
    me_allocator_malloc(a, 3, 512 * 1024);
    EXPECT("merged allocated", s->allocated, 768 * 1024);
    EXPECT("merged reserved", s->reserved, 2 * MiB);
    /* 1 MiB fits the 1.25 MiB tail, leaving 256 KiB: 512 B would still fit
     * there, 300 KiB does not and needs a second small segment */
    me_allocator_malloc(a, 4, 1024 * 1024);
    EXPECT("tail fits 1 MiB", s->reserved, 2 * MiB);
    me_allocator_malloc(a, 5, 512);
    EXPECT("512 B fits the 256 KiB left", s->reserved, 2 * MiB);
    me_allocator_malloc(a, 6, 300 * 1024);
    EXPECT("small pool full: new segment", s->reserved, 4 * MiB);
    me_allocator_free(a);

    /* Many small blocks (the per-size heaps): a small block is never larger
     * than its rounded request (a remainder of 512 B or more is split off),
     * so allocated is the sum of the live rounded requests; freeing every
     * block merges each segment whole again, and the largest small request
     * then fits without a new segment. Deterministic pseudo-random mix. */
    me_allocator_new(&a);
    s = me_allocator_stats(a);
    enum { N = 20000 };
    static uint64_t live[N];
    uint64_t sum = 0, rng = 42;
    int bad_sum = 0, bad_reserved = 0;
    for (int step = 0; step < 200000; step++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        int h = (int)((rng >> 33) % N);
        if (live[h]) {
            me_allocator_release(a, h);
            sum -= me_allocator_round(live[h]);
            live[h] = 0;
        } else {
            uint64_t bytes = 1 + (rng >> 13) % (rng & 1 ? 4096 : MiB);
            uint64_t before = s->reserved;
            me_allocator_malloc(a, h, bytes);
            live[h] = bytes;
            sum += me_allocator_round(bytes);
            bad_reserved += s->reserved != before && s->reserved != before + 2 * MiB;
        }
        bad_sum += s->allocated != sum;
    }
    EXPECT("allocated is the sum of rounded requests", bad_sum, 0);
    EXPECT("small requests only ever add 2 MiB segments", bad_reserved, 0);
    for (int h = 0; h < N; h++)
        if (live[h]) me_allocator_release(a, h);
    EXPECT("all freed", s->allocated, 0);
    uint64_t reserved = s->reserved;
    me_allocator_malloc(a, 0, MiB);
    EXPECT("segments merged whole again", s->reserved, reserved);
    me_allocator_free(a);

    printf("%d failure(s)\n", fails);
    return fails != 0;
}
