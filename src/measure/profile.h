/* Device profiles: what `memest-measure --calibrate` measured on a GPU, as
 * JSON (doc/device-profile.md), read back by memest and memest-measure.
 * Plain C (cJSON), no CUDA: both programs link it. */
#ifndef MEMEST_MEASURE_PROFILE_H
#define MEMEST_MEASURE_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "memest/memest.h"

#define ME_DEVICE_PROFILE_FORMAT "memest-device-profile"
#define ME_DEVICE_PROFILE_VERSION 1

typedef struct MeDeviceProfile {
    MemestGpu gpu;                   /* name, memory, bandwidth, fp32/fp16 FLOP/s, SMs */
    uint64_t cuda_context_bytes;     /* device memory the CUDA context takes */
    uint64_t allocation_granularity; /* device memory one cudaMalloc(1) takes */
    uint64_t cublas_workspace_bytes; /* what cuBLAS allocates for itself at the first GEMM */
    char measured[256];              /* "<date>, driver ..., CUDA ...", may be empty */
} MeDeviceProfile;

/* Reads a device profile. Returns 0, or MEMEST_ERR_IO (cannot read),
 * MEMEST_ERR_INVALID (not a profile: the message names the file and the
 * field: missing, wrong type, not a positive number...), MEMEST_ERR_NOMEM. */
int me_device_profile_read(const char *path, MeDeviceProfile *out, char *err, size_t errlen);

/* The same, parsed from text (name is used in messages). */
int me_device_profile_parse(const char *text, const char *name, MeDeviceProfile *out, char *err, size_t errlen);

/* What memest needs from a profile: the GPU for capacity and roofline
 * (memest_set_device), the context and cuBLAS workspace for
 * MemestMemorySettings.cuda_context / .cublas_workspace. Any of the
 * out-parameters may be NULL. */
int me_device_profile_load(const char *path, MemestGpu *gpu, uint64_t *context, uint64_t *workspace, char *err, size_t errlen);

/* Writes p as a profile (the format above); 0 or MEMEST_ERR_IO. */
int me_device_profile_write(FILE *f, const MeDeviceProfile *p);
/* s as a JSON string (null for NULL); memest-measure's reports use it too. */
void me_json_string(FILE *f, const char *s);

#endif
