/* A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
 * rules in REFERENCE.md): requests rounded to 512 B; requests up to 1 MiB
 * served from a small pool of 2 MiB segments, larger ones from a large pool
 * (20 MiB segments below 10 MiB, else the request rounded up to 2 MiB);
 * best fit among cached free blocks; a block is split when the remainder is
 * at least 512 B (small) or more than 1 MiB (large); freed blocks merge with
 * free neighbours and stay cached (reserved) — no empty_cache(). */
#ifndef MEMEST_ALLOCATOR_H
#define MEMEST_ALLOCATOR_H

#include <stdint.h>

typedef struct MeAllocator MeAllocator;

typedef struct MeAllocStats {
    uint64_t allocated, reserved;         /* now */
    uint64_t peak_allocated, peak_reserved;
    uint64_t requested, peak_requested;   /* before rounding */
    int segments;
} MeAllocStats;

int me_allocator_new(MeAllocator **out);
void me_allocator_free(MeAllocator *a);
/* Allocates bytes for handle (any int chosen by the caller, unique while live). */
int me_allocator_malloc(MeAllocator *a, int handle, uint64_t bytes);
int me_allocator_release(MeAllocator *a, int handle);
const MeAllocStats *me_allocator_stats(const MeAllocator *a);
uint64_t me_allocator_round(uint64_t bytes);

#endif
