/* Shared by gpu.c, exec.c and calibrate.c (CUDA builds only). */
#ifndef MEMEST_MEASURE_GPU_INTERNAL_H
#define MEMEST_MEASURE_GPU_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu.h"

/* Makes device current and its context exist; the first call in the
 * process records the device use right after the context was made (the
 * context's size, other processes included) into *context. */
int me_gpu_session(int device, uint64_t *context, char *err, size_t errlen);
/* Device memory in use now: total − free (cudaMemGetInfo). */
int me_gpu_device_used(uint64_t *used);
/* What a fresh cuBLAS handle allocates for itself: *handle at cublasCreate,
 * *first_gemm at its first SGEMM (its default workspace). */
int me_gpu_cublas_probe(uint64_t *handle, uint64_t *first_gemm, char *err, size_t errlen);
const char *me_cublas_error(cublasStatus_t s);

#define ME_CUDA_TRY(call, what)                                                                        \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            if (err && errlen) snprintf(err, errlen, "%s: %s (%s)", what, cudaGetErrorString(e_), #call); \
            return MEMEST_ERR_IO;                                                                    \
        }                                                                                            \
    } while (0)

#define ME_CUBLAS_TRY(call, what)                                                                      \
    do {                                                                                             \
        cublasStatus_t s_ = (call);                                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                           \
            if (err && errlen) snprintf(err, errlen, "%s: %s (%s)", what, me_cublas_error(s_), #call); \
            return MEMEST_ERR_IO;                                                                    \
        }                                                                                            \
    } while (0)

#endif
