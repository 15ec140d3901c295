/* Device profiles: memest-measure writes what --calibrate measured as JSON
 * (doc/device-profile.md); the library reads them back
 * (memest_device_profile_load, src/device_profile.c). Plain C, no CUDA. */
#include <stdio.h>

#include "profile.h"

int me_device_profile_load(const char *path, MemestGpu *gpu, uint64_t *context, uint64_t *workspace, char *err, size_t errlen)
{
    MeDeviceProfile p;
    int rc = memest_device_profile_load(path, &p, err, errlen);
    if (rc < 0) return rc;
    if (gpu) *gpu = p.gpu;
    if (context) *context = p.cuda_context_bytes;
    if (workspace) *workspace = p.cublas_workspace_bytes;
    return 0;
}

void me_json_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int me_device_profile_write(FILE *f, const MeDeviceProfile *p)
{
    fprintf(f, "{\n  \"format\": \"" ME_DEVICE_PROFILE_FORMAT "\",\n  \"version\": %d,\n  \"name\": ", ME_DEVICE_PROFILE_VERSION);
    me_json_string(f, p->gpu.name);
    fprintf(f, ",\n  \"memory_bytes\": %llu,\n", (unsigned long long)p->gpu.memory);
    fprintf(f, "  \"bandwidth_bytes_per_s\": %.6g,\n", p->gpu.bandwidth);
    fprintf(f, "  \"fp32_flops\": %.6g,\n", p->gpu.fp32_flops);
    fprintf(f, "  \"fp16_flops\": %.6g,\n", p->gpu.fp16_flops);
    fprintf(f, "  \"sms\": %d,\n", p->gpu.sms);
    fprintf(f, "  \"cuda_context_bytes\": %llu,\n", (unsigned long long)p->cuda_context_bytes);
    fprintf(f, "  \"allocation_granularity\": %llu,\n", (unsigned long long)p->allocation_granularity);
    fprintf(f, "  \"cublas_workspace_bytes\": %llu,\n", (unsigned long long)p->cublas_workspace_bytes);
    fprintf(f, "  \"measured\": ");
    me_json_string(f, p->measured);
    fprintf(f, "\n}\n");
    return ferror(f) ? MEMEST_ERR_IO : 0;
}
