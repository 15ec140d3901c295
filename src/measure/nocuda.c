/* memest-measure built without CUDA (nvcc was not found, or the build
 * turned it off): it still parses and plans, then says that nothing can be
 * measured here (exit 77). */
#include <stdio.h>
#include <string.h>

#include "gpu.h"

#define WHY "built without CUDA support: nvcc was not found when memest was configured (meson -Dcuda=enabled to insist)"

int me_gpu_probe(int device, MeGpuInfo *info, char *why, size_t whylen)
{
    (void)device;
    memset(info, 0, sizeof(*info));
    if (why && whylen) snprintf(why, whylen, "%s", WHY);
    return MEMEST_ERR_UNSUPPORTED;
}

void me_gpu_software(const MeGpuInfo *info, char *buf, size_t n)
{
    (void)info;
    snprintf(buf, n, "no CUDA");
}

int me_gpu_calibrate(int device, bool quick, MeDeviceProfile *out, char *err, size_t errlen)
{
    (void)device;
    (void)quick;
    memset(out, 0, sizeof(*out));
    if (err && errlen) snprintf(err, errlen, "%s", WHY);
    return MEMEST_ERR_UNSUPPORTED;
}

int me_gpu_measure(MePlan *const *plans, int n_plans, const MeMeasureOptions *o, MeMeasureResult *r, char *err, size_t errlen)
{
    (void)plans;
    (void)n_plans;
    (void)o;
    memset(r, 0, sizeof(*r));
    if (err && errlen) snprintf(err, errlen, "%s", WHY);
    return MEMEST_ERR_UNSUPPORTED;
}

void me_measure_result_free(MeMeasureResult *r)
{
    (void)r;
}
