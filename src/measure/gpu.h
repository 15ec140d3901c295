/* What memest-measure asks of the GPU side: gpu.c, exec.c and calibrate.c
 * with CUDA, nocuda.c without. Plain C types only. */
#ifndef MEMEST_MEASURE_GPU_H
#define MEMEST_MEASURE_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"
#include "profile.h"

typedef struct MeGpuInfo {
    char name[256];
    int device;
    int cc_major, cc_minor;
    int sms;
    uint64_t total_memory;
    int driver_version, runtime_version; /* 12040 = 12.4 */
    int cublas_version, cudnn_version;   /* 0: none */
} MeGpuInfo;

/* 0 with info when device can be used; < 0 otherwise, why saying what
 * cudaGetDeviceCount answered ("cudaGetDeviceCount: no CUDA-capable device
 * is detected", "built without CUDA support"). */
int me_gpu_probe(int device, MeGpuInfo *info, char *why, size_t whylen);

/* "driver 12.4, CUDA runtime 13.0, cuBLAS 13.0.0, cuDNN 9.13.0" */
void me_gpu_software(const MeGpuInfo *info, char *buf, size_t n);

/* Measures the device profile (doc/device-profile.md). quick: fewer and
 * smaller repetitions (seconds, for the roofline of a measurement run). */
int me_gpu_calibrate(int device, bool quick, MeDeviceProfile *out, char *err, size_t errlen);

typedef struct MeMeasureOptions {
    int device;
    int warmup, iterations;  /* steps run before timing, steps timed */
    bool direct_conv;        /* hand-written convolution kernels instead of cuDNN */
    uint64_t seed;
    float lr;
    const char *alloc_log;   /* CSV of every allocator call of the measured steps, or NULL */
} MeMeasureOptions;

/* What one plan's steps measured. */
typedef struct MeStepMeasure {
    uint64_t peak_plan;       /* own accounting: the plan's buffers, bytes requested */
    uint64_t peak_all;        /* + library workspaces and scratch */
    uint64_t device_peak;     /* cudaMemGetInfo: highest use during the step − use before the model */
    uint64_t *note_live;      /* live plan bytes at each timeline point */
    uint64_t *note_device;    /* device use (− before the model) at each timeline point */
    int n_notes;
    bool measured;
} MeStepMeasure;

typedef struct MeMeasureResult {
    uint64_t context_bytes;       /* device use after cudaFree(0) */
    uint64_t handles_bytes;       /* added by cublasCreate and cudnnCreate */
    uint64_t cublas_own_bytes;    /* what cuBLAS allocated for itself at a first GEMM (probe handle) */
    uint64_t before_model;        /* device use before the first allocation of the model */
    uint64_t device_used_peak;    /* highest device use seen (absolute) */
    uint64_t library_peak;        /* largest cuDNN workspace asked for */
    uint64_t scratch_bytes;       /* the executor's own scratch (per-channel sums, ...) */
    uint64_t alloc_calls, free_calls;
    MeStepMeasure step[2];        /* per plan: inference or training step 1, training steady state */
    double *fwd_s, *bwd_s;        /* per node: seconds per step (mean over timed steps) */
    double forward_s, backward_s, optimizer_s, loss_s; /* sums of the layer events */
    double step_s;                /* events around the whole step (includes gaps, allocations) */
    int warmup, iterations;
    char conv[96];                /* how the convolutions ran */
} MeMeasureResult;

/* Runs plans[0] for the first step (its baseline, then its step), then
 * plans[n_plans − 1] for every later step (warm-up, then timed), through
 * the instrumented allocator, following each plan event for event. */
int me_gpu_measure(MePlan *const *plans, int n_plans, const MeMeasureOptions *o, MeMeasureResult *r, char *err, size_t errlen);
void me_measure_result_free(MeMeasureResult *r);

#endif
