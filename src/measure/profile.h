/* Device profiles: what `memest-measure --calibrate` measured on a GPU, as
 * JSON (doc/device-profile.md), read back by the library. Plain C, no CUDA. */
#ifndef MEMEST_MEASURE_PROFILE_H
#define MEMEST_MEASURE_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "memest/memest.h"

#define ME_DEVICE_PROFILE_FORMAT MEMEST_DEVICE_PROFILE_FORMAT
#define ME_DEVICE_PROFILE_VERSION MEMEST_DEVICE_PROFILE_VERSION

/* The reader is the library's (memest_device_profile_load, _parse). */
typedef MemestDeviceProfile MeDeviceProfile;
#define me_device_profile_read memest_device_profile_load
#define me_device_profile_parse memest_device_profile_parse

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
