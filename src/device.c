/* GPUs: the built-in table, sizes, and roofline time. Vendor peaks from
 * REFERENCE.md; memory is the total nvidia-smi (rocm-smi) reports. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "optim.h"
#include "model.h"

#define MIB (UINT64_C(1) << 20)
#define GBS 1e9
#define TF 1e12

/* link_bandwidth: one direction between two GPUs of a node, from the
 * vendors' sheets: NVLink's total over two (H100/H200 SXM 900 GB/s,
 * A100 600, V100 300, B200 1800, the RTX bridges 100/112.5), MI300X's
 * Infinity Fabric 896 GB/s peer over two, else the card's PCIe x16 link
 * (3.0: 16, 4.0: 32, 5.0: 64 GB/s) */
static const MemestGpu builtin[] = {
    { "gtx1070", 8192 * MIB, 256 * GBS, 6.5 * TF, 0, 15, 16 * GBS },
    { "rtx2080ti", 11264 * MIB, 616 * GBS, 13.4 * TF, 53.8 * TF, 68, 50 * GBS },
    { "rtx3090", 24576 * MIB, 936 * GBS, 35.6 * TF, 71 * TF, 82, 56.25 * GBS },
    { "rtx4090", 24564 * MIB, 1008 * GBS, 82.6 * TF, 165 * TF, 128, 32 * GBS },
    { "t4", 15360 * MIB, 320 * GBS, 8.1 * TF, 65 * TF, 40, 16 * GBS },
    { "v100-16gb", 16384 * MIB, 900 * GBS, 15.7 * TF, 125 * TF, 80, 150 * GBS },
    { "v100-32gb", 32768 * MIB, 900 * GBS, 15.7 * TF, 125 * TF, 80, 150 * GBS },
    { "a10", 23028 * MIB, 600 * GBS, 31.2 * TF, 125 * TF, 72, 32 * GBS },
    { "a100-40gb", 40960 * MIB, 1555 * GBS, 19.5 * TF, 312 * TF, 108, 300 * GBS },
    { "a100-80gb", 81920 * MIB, 2039 * GBS, 19.5 * TF, 312 * TF, 108, 300 * GBS },
    { "l4", 23034 * MIB, 300 * GBS, 30.3 * TF, 121 * TF, 58, 32 * GBS },
    { "l40s", 46068 * MIB, 864 * GBS, 91.6 * TF, 362 * TF, 142, 32 * GBS },
    { "h100-sxm", 81559 * MIB, 3350 * GBS, 67 * TF, 989 * TF, 132, 450 * GBS },
    { "h100-pcie", 81559 * MIB, 2000 * GBS, 51 * TF, 756 * TF, 114, 64 * GBS },
    { "h200", 143771 * MIB, 4800 * GBS, 67 * TF, 989 * TF, 132, 450 * GBS },
    { "b200", 183359 * MIB, 8000 * GBS, 80 * TF, 2250 * TF, 148, 900 * GBS },
    { "mi300x", 196608 * MIB, 5300 * GBS, 81.7 * TF, 1307 * TF, 304, 448 * GBS },
};
#define N_BUILTIN ((int)(sizeof(builtin) / sizeof(builtin[0])))

const MemestGpu *memest_gpu_table(int *count)
{
    *count = N_BUILTIN;
    return builtin;
}

/* "RTX 3090", "rtx3090", "A100_80GB" all name the same card */
static void canon(const char *s, char *out, size_t n)
{
    size_t o = 0;
    for (; *s && o + 1 < n; s++)
        if (isalnum((unsigned char)*s)) out[o++] = (char)tolower((unsigned char)*s);
    out[o] = 0;
}

int memest_gpu_find(const char *name, const MemestGpu *extra, int n_extra, MemestGpu *out)
{
    char want[64], have[64];
    canon(name, want, sizeof(want));
    for (int i = 0; extra && i < n_extra; i++) {
        canon(extra[i].name, have, sizeof(have));
        if (!strcmp(want, have)) { *out = extra[i]; return 0; }
    }
    for (int i = 0; i < N_BUILTIN; i++) {
        canon(builtin[i].name, have, sizeof(have));
        if (!strcmp(want, have)) { *out = builtin[i]; return 0; }
    }
    /* short forms: "h100" → h100-sxm, "a100" → a100-80gb, "v100" → v100-32gb */
    static const struct { const char *a, *b; } alias[] = {
        { "h100", "h100sxm" }, { "a100", "a100-80gb" }, { "v100", "v10032gb" }, { "3090", "rtx3090" }, { "4090", "rtx4090" },
    };
    for (size_t k = 0; k < sizeof(alias) / sizeof(alias[0]); k++) {
        if (strcmp(want, alias[k].a)) continue;
        char target[64];
        canon(alias[k].b, target, sizeof(target));
        for (int i = 0; i < N_BUILTIN; i++) {
            canon(builtin[i].name, have, sizeof(have));
            if (!strcmp(target, have)) { *out = builtin[i]; return 0; }
        }
    }
    return ME_EINVAL;
}

uint64_t memest_parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0) || v > 1e18) return 0;
    double mult = (double)(UINT64_C(1) << 30); /* a bare number is GiB */
    if (*end) {
        if (!strcasecmp(end, "GiB") || !strcasecmp(end, "G")) mult = (double)(UINT64_C(1) << 30);
        else if (!strcasecmp(end, "GB")) mult = 1e9;
        else if (!strcasecmp(end, "MiB") || !strcasecmp(end, "M")) mult = (double)MIB;
        else if (!strcasecmp(end, "MB")) mult = 1e6;
        else if (!strcasecmp(end, "TiB")) mult = (double)(UINT64_C(1) << 40);
        else if (!strcasecmp(end, "TB")) mult = 1e12;
        else return 0;
    }
    double b = v * mult;
    return b > 1.8e19 ? 0 : (uint64_t)b;
}

uint64_t memest_gpu_context(const MemestGpu *gpu)
{
    return 250 * MIB + (uint64_t)(gpu && gpu->sms > 0 ? gpu->sms : 80) * (3 * MIB / 2);
}

int memest_gpu_load_file(const char *path, MemestGpu **gpus, int *count, char *err, size_t errlen)
{
    MemestGpu *list = NULL; /* the new list, *gpus once every entry is good */
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return ME_EIO;
    }
    char *buf = me_malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!buf) return ME_ENOMEM;
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf);
    me_free(buf);
    int rc = 0;
    if (!cJSON_IsArray(root)) {
        snprintf(err, errlen, "%s: expected a JSON list of GPUs", path);
        rc = ME_EINVAL;
        goto end;
    }
    int k = 0, n_old = *count;
    if (!(list = me_malloc(sizeof(MemestGpu) * (size_t)(n_old + cJSON_GetArraySize(root) + 1)))) {
        rc = ME_ENOMEM;
        goto end;
    }
    if (n_old) memcpy(list, *gpus, sizeof(MemestGpu) * (size_t)n_old);
    for (const cJSON *e = root->child; e; e = e->next, k++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *mem = cJSON_GetObjectItemCaseSensitive(e, "memory_mib");
        const cJSON *bw = cJSON_GetObjectItemCaseSensitive(e, "bandwidth_gbs");
        const cJSON *f32 = cJSON_GetObjectItemCaseSensitive(e, "fp32_tflops");
        const cJSON *f16 = cJSON_GetObjectItemCaseSensitive(e, "fp16_tflops");
        const cJSON *sms = cJSON_GetObjectItemCaseSensitive(e, "sms");
        if (!cJSON_IsString(name) || !cJSON_IsNumber(mem) || mem->valuedouble <= 0 || !cJSON_IsNumber(bw) || bw->valuedouble <= 0 ||
            !cJSON_IsNumber(f32) || f32->valuedouble <= 0) {
            snprintf(err, errlen, "%s: [%d]: needs name, memory_mib, bandwidth_gbs and fp32_tflops (positive)", path, k);
            rc = ME_EINVAL;
            goto end;
        }
        MemestGpu *g = &list[n_old + k];
        memset(g, 0, sizeof(*g));
        snprintf(g->name, sizeof(g->name), "%s", name->valuestring);
        g->memory = (uint64_t)(mem->valuedouble * (double)MIB);
        g->bandwidth = bw->valuedouble * GBS;
        g->fp32_flops = f32->valuedouble * TF;
        g->fp16_flops = cJSON_IsNumber(f16) ? f16->valuedouble * TF : 0;
        g->sms = cJSON_IsNumber(sms) ? (int)sms->valuedouble : 0;
        const cJSON *link = cJSON_GetObjectItemCaseSensitive(e, "link_gbs"); /* optional: --plan's collectives */
        g->link_bandwidth = cJSON_IsNumber(link) && link->valuedouble > 0 ? link->valuedouble * GBS : 0;
    }
    me_free(*gpus);
    *gpus = list;
    *count = n_old + k;
    list = NULL;
end:
    me_free(list);
    cJSON_Delete(root);
    return rc;
}

/* Whether gpu carries what a roofline needs: --gpu-mem alone gives only a
 * capacity, and 0 bytes/s or 0 FLOP/s would make every time 0/0 (NaN). */
bool me_roofline_known(const MemestGpu *gpu)
{
    return gpu->bandwidth > 0 && gpu->fp32_flops > 0 && gpu->bandwidth < 1e300 && gpu->fp32_flops < 1e300;
}

/* Whether node n computes in 16 bits: its first float input is fp16 or bf16. */
static bool node_16bit(const MeGraph *g, const MeNode *n)
{
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0 || !me_dtype_is_float(g->v[v].dtype)) continue;
        return g->v[v].dtype == ME_DT_F16 || g->v[v].dtype == ME_DT_BF16;
    }
    return false;
}

/* Roofline: a node takes as long as the slower of its arithmetic at the
 * dtype's peak (tensor cores for contractions in 16 bits) and its bytes
 * over the memory bandwidth. Without bandwidth or FLOP/s the times stay 0
 * and memest_timing says there is none. */
int memest_set_device(MemestAnalysis *a, const MemestGpu *gpu, int low_precision)
{
    if (!a || !gpu) return ME_EINVAL;
    if (me_analysis_current(a) < 0) return ME_ESTALE;
    const MeGraph *g = a->g;
    const MeCost *dc = a->model->dcost;
    if (!a->time_s && !(a->time_s = me_malloc(sizeof(double) * (size_t)(g->nn ? g->nn : 1)))) return ME_ENOMEM;
    a->gpu = *gpu;
    a->has_gpu = true;
    a->low_precision = low_precision;
    bool known = me_roofline_known(gpu);
    for (int i = 0; i < g->nn; i++) {
        if (!known) { a->time_s[i] = 0; continue; }
        const MeCost *d = &dc[i];
        bool contraction = d->macs > 0;
        /* the dtype the graph computes in picks the peak too: a bf16 or
         * fp16 model (a language model's torch_dtype) runs its GEMMs on the
         * 16-bit tensor cores without --amp or --dtype */
        bool lp = low_precision || node_16bit(g, &g->n[i]);
        double peak = lp && contraction && gpu->fp16_flops > 0 ? gpu->fp16_flops : gpu->fp32_flops;
        double bytes = (double)(d->read + d->write);
        if (low_precision) bytes *= 0.5; /* 16-bit activations and weight copies */
        double tc = (double)d->flops / peak, tm = bytes / gpu->bandwidth;
        a->time_s[i] = tc > tm ? tc : tm;
    }
    return 0;
}

int memest_timing(const MemestAnalysis *a, MemestTiming *out)
{
    memset(out, 0, sizeof(*out));
    if (!a || !a->has_gpu) return ME_EINVAL;
    if (!me_roofline_known(&a->gpu)) return ME_EUNSUPPORTED;
    const MeGraph *g = a->g;
    for (int i = 0; i < g->nn; i++) out->forward_s += a->time_s[i];
    out->batch = g->n_inputs && g->v[g->inputs[0]].shape.rank ? (int)g->v[g->inputs[0]].shape.d[0] : 1;
    const MeMemResult *r = &a->memory;
    if (a->has_memory && r->settings.mode == MEMEST_RUN_TRAIN) {
        /* backward: about twice the forward (a gradient for the input and
         * one for the weights of every contraction) */
        out->backward_s = 2 * out->forward_s;
        if (r->n_mem && r->mem[0].recompute_macs && a->totals.macs)
            out->recompute_s = out->forward_s * (double)r->mem[0].recompute_macs / (double)a->totals.macs;
        /* the optimizer streams parameters, gradients and state */
        const MeOptimizer *od = me_optimizer(r->settings.optimizer);
        out->optimizer_s = (double)a->totals.params * (od ? od->stream_bytes : 0) / a->gpu.bandwidth;
    }
    out->step_s = out->forward_s + out->backward_s + out->recompute_s + out->optimizer_s;
    out->samples_per_s = out->step_s > 0 ? out->batch / out->step_s : 0;
    return 0;
}
