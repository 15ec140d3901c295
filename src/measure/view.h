/* Where a tensor's elements lie in a buffer (shared by the host plan and
 * the CUDA kernels, so plain C that nvcc also compiles). */
#ifndef MEMEST_MEASURE_VIEW_H
#define MEMEST_MEASURE_VIEW_H

#include <stdint.h>

#ifdef __CUDACC__
#define ME_HD __host__ __device__
#else
#define ME_HD
#endif

/* Element i (of the tensor, row-major) is at off + (i / row) * stride +
 * i % row (in elements); row 0 means contiguous from off. Gradients of
 * Concat inputs are such slices of the output's gradient. */
typedef struct MeView {
    int64_t off, row, stride;
} MeView;

ME_HD static inline int64_t me_view_at(MeView v, int64_t i)
{
    return v.row ? v.off + (i / v.row) * v.stride + i % v.row : v.off + i;
}

#endif
