/* Row-major GEMMs through column-major cuBLAS: a row-major C[M,N] =
 * op(A)·op(B) is the column-major C^T = op(B)^T·op(A)^T, so the call swaps
 * the operands and the sizes. Plain C; tests/measure/test_kernels_cpu.c
 * runs the mapping through a CPU emulation of cublasSgemm's column-major
 * contract. */
#ifndef MEMEST_MEASURE_GEMM_H
#define MEMEST_MEASURE_GEMM_H

#include <stdint.h>

/* One cublasSgemm call: C (m × n, column-major, ldc) = op(first) · op(second),
 * first/second being 0 for the row-major A operand and 1 for B. */
typedef struct MeGemmCall {
    int trans_first, trans_second; /* 1: CUBLAS_OP_T */
    int64_t m, n, k;
    int first, second;             /* 0: A, 1: B */
    int64_t ld_first, ld_second, ldc;
} MeGemmCall;

/* Row-major C[M,N] = op(A)·op(B), op(A) being [M,K] (A stored [M,K] with
 * leading dimension lda, or [K,M] when ta), op(B) [K,N] (B stored [K,N],
 * or [N,K] when tb), C with leading dimension ldc. */
static inline MeGemmCall me_gemm_rowmajor(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc)
{
    MeGemmCall c;
    c.trans_first = tb;
    c.trans_second = ta;
    c.m = N;
    c.n = M;
    c.k = K;
    c.first = 1;
    c.second = 0;
    c.ld_first = ldb;
    c.ld_second = lda;
    c.ldc = ldc;
    return c;
}

#endif
