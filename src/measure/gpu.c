/* memest-measure's GPU probe and session (CUDA builds). */
#include <string.h>
#ifdef ME_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "gpu_internal.h"

int me_gpu_probe(int device, MeGpuInfo *info, char *why, size_t whylen)
{
    memset(info, 0, sizeof(*info));
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (why && whylen) snprintf(why, whylen, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        return MEMEST_ERR_UNSUPPORTED;
    }
    if (n <= 0) {
        if (why && whylen) snprintf(why, whylen, "cudaGetDeviceCount: 0 devices");
        return MEMEST_ERR_UNSUPPORTED;
    }
    if (device < 0 || device >= n) {
        if (why && whylen) snprintf(why, whylen, "device %d asked for, %d present", device, n);
        return MEMEST_ERR_UNSUPPORTED;
    }
    struct cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
        if (why && whylen) snprintf(why, whylen, "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
        return MEMEST_ERR_UNSUPPORTED;
    }
    info->device = device;
    snprintf(info->name, sizeof(info->name), "%s", prop.name);
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->sms = prop.multiProcessorCount;
    info->total_memory = (uint64_t)prop.totalGlobalMem;
    cudaDriverGetVersion(&info->driver_version);
    cudaRuntimeGetVersion(&info->runtime_version);
    int ma = 0, mi = 0, pa = 0;
    if (cublasGetProperty(MAJOR_VERSION, &ma) == CUBLAS_STATUS_SUCCESS && cublasGetProperty(MINOR_VERSION, &mi) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &pa) == CUBLAS_STATUS_SUCCESS)
        info->cublas_version = ma * 10000 + mi * 100 + pa;
#ifdef ME_HAVE_CUDNN
    info->cudnn_version = (int)cudnnGetVersion();
#endif
    return 0;
}

void me_gpu_software(const MeGpuInfo *info, char *buf, size_t n)
{
    int o = snprintf(buf, n, "driver %d.%d, CUDA runtime %d.%d", info->driver_version / 1000, info->driver_version % 1000 / 10,
                     info->runtime_version / 1000, info->runtime_version % 1000 / 10);
    if (o < 0 || (size_t)o >= n) return;
    if (info->cublas_version)
        o += snprintf(buf + o, n - (size_t)o, ", cuBLAS %d.%d.%d", info->cublas_version / 10000, info->cublas_version / 100 % 100,
                      info->cublas_version % 100);
    if (o < 0 || (size_t)o >= n) return;
    if (info->cudnn_version)
        snprintf(buf + o, n - (size_t)o, ", cuDNN %d.%d.%d", info->cudnn_version / 10000, info->cudnn_version / 100 % 100,
                 info->cudnn_version % 100);
    else
        snprintf(buf + o, n - (size_t)o, ", no cuDNN");
}

int me_gpu_device_used(uint64_t *used)
{
    size_t fr = 0, total = 0;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess) return MEMEST_ERR_IO;
    *used = (uint64_t)(total - fr);
    return 0;
}

static bool session_open;
static uint64_t session_context;

int me_gpu_session(int device, uint64_t *context, char *err, size_t errlen)
{
    if (!session_open) {
        ME_CUDA_TRY(cudaSetDevice(device), "selecting the device");
        ME_CUDA_TRY(cudaFree(0), "creating the CUDA context");
        ME_CUDA_TRY(cudaDeviceSynchronize(), "creating the CUDA context");
        uint64_t used = 0;
        if (me_gpu_device_used(&used) < 0) {
            if (err && errlen) snprintf(err, errlen, "cudaMemGetInfo failed");
            return MEMEST_ERR_IO;
        }
        session_context = used;
        session_open = true;
    } else {
        ME_CUDA_TRY(cudaSetDevice(device), "selecting the device");
    }
    if (context) *context = session_context;
    return 0;
}

const char *me_cublas_error(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "cuBLAS error";
    }
}

int me_gpu_cublas_probe(uint64_t *handle, uint64_t *first_gemm, char *err, size_t errlen)
{
    const int n = 256;
    float *a = NULL, *c = NULL;
    uint64_t u0 = 0, u1 = 0, u2 = 0;
    ME_CUDA_TRY(cudaMalloc((void **)&a, sizeof(float) * (size_t)n * n), "cuBLAS probe");
    if (cudaMalloc((void **)&c, sizeof(float) * (size_t)n * n) != cudaSuccess) {
        cudaFree(a);
        if (err && errlen) snprintf(err, errlen, "cuBLAS probe: cudaMalloc failed");
        return MEMEST_ERR_IO;
    }
    cudaMemset(a, 0, sizeof(float) * (size_t)n * n);
    cudaDeviceSynchronize();
    me_gpu_device_used(&u0);
    cublasHandle_t h;
    cublasStatus_t s = cublasCreate(&h);
    int rc = 0;
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (err && errlen) snprintf(err, errlen, "cublasCreate: %s", me_cublas_error(s));
        rc = MEMEST_ERR_IO;
    } else {
        cudaDeviceSynchronize();
        me_gpu_device_used(&u1);
        const float one = 1, zero = 0;
        s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, a, n, &zero, c, n);
        cudaDeviceSynchronize();
        me_gpu_device_used(&u2);
        if (s != CUBLAS_STATUS_SUCCESS) {
            if (err && errlen) snprintf(err, errlen, "cublasSgemm: %s", me_cublas_error(s));
            rc = MEMEST_ERR_IO;
        }
        cublasDestroy(h);
    }
    cudaFree(a);
    cudaFree(c);
    cudaDeviceSynchronize();
    if (handle) *handle = u1 > u0 ? u1 - u0 : 0;
    if (first_gemm) *first_gemm = u2 > u1 ? u2 - u1 : 0;
    return rc;
}
