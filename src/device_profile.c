/* Device-profile reader (doc/device-profile.md): what memest-measure
 * --calibrate wrote about a GPU. Every field is checked for presence, type
 * and range; a message names the file and the field. The writer is
 * memest-measure's (src/measure/profile.c). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define MAX_PROFILE_BYTES (1 << 20)
#define MAX_EXACT 9007199254740992.0 /* 2^53: integers JSON numbers hold exactly */

typedef struct P {
    const cJSON *root;
    const char *name;
    char *err;
    size_t errlen;
} P;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int bad(const P *p, const char *fmt, ...)
{
    if (p->err && p->errlen) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(p->err, p->errlen, "%s: %s", p->name, msg);
    }
    return MEMEST_ERR_INVALID;
}

static const char *type_name(const cJSON *x)
{
    if (cJSON_IsString(x)) return "a string";
    if (cJSON_IsNumber(x)) return "a number";
    if (cJSON_IsBool(x)) return "a boolean";
    if (cJSON_IsNull(x)) return "null";
    if (cJSON_IsArray(x)) return "a list";
    if (cJSON_IsObject(x)) return "an object";
    return "something else";
}

/* A number field: present, a number, finite, in range; integral when asked. */
static int number(const P *p, const char *field, bool integer, bool positive, double *out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(p->root, field);
    if (!x) return bad(p, "field '%s' is missing", field);
    if (!cJSON_IsNumber(x)) return bad(p, "field '%s' must be a number, got %s", field, type_name(x));
    double v = x->valuedouble;
    char shown[64];
    snprintf(shown, sizeof(shown), "%.17g", v);
    if (!isfinite(v)) return bad(p, "field '%s' is not a finite number (%s)", field, shown);
    if (v < 0 || (positive && v == 0))
        return bad(p, positive ? "field '%s' must be positive, got %s" : "field '%s' must not be negative, got %s", field, shown);
    if (integer && (v != floor(v) || v > MAX_EXACT))
        return bad(p, "field '%s' must be a whole number of at most 2^53, got %s", field, shown);
    *out = v;
    return 0;
}

static int string(const P *p, const char *field, bool required, char *out, size_t outlen)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(p->root, field);
    if (!x) {
        if (!required) return 0;
        return bad(p, "field '%s' is missing", field);
    }
    if (!cJSON_IsString(x)) return bad(p, "field '%s' must be a string, got %s", field, type_name(x));
    if (required && !x->valuestring[0]) return bad(p, "field '%s' must not be empty", field);
    snprintf(out, outlen, "%s", x->valuestring);
    return 0;
}

int memest_device_profile_parse(const char *text, const char *name, MemestDeviceProfile *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (err && errlen) err[0] = 0;
    P p = { .name = name ? name : "device profile", .err = err, .errlen = errlen };
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        if (err && errlen) {
            long at = end && end >= text ? (long)(end - text) : 0;
            snprintf(err, errlen, "%s: not JSON (parse error at byte %ld)", p.name, at);
        }
        return MEMEST_ERR_INVALID;
    }
    p.root = root;
    int rc = 0;
    double v;
    char fmt[64] = "";
    if (!cJSON_IsObject(root)) {
        rc = bad(&p, "expected a JSON object, got %s", type_name(root));
        goto end;
    }
    if ((rc = string(&p, "format", true, fmt, sizeof(fmt))) < 0) goto end;
    if (strcmp(fmt, MEMEST_DEVICE_PROFILE_FORMAT)) {
        rc = bad(&p, "field 'format' is \"%s\", not \"" MEMEST_DEVICE_PROFILE_FORMAT "\"", fmt);
        goto end;
    }
    if ((rc = number(&p, "version", true, true, &v)) < 0) goto end;
    if (v != MEMEST_DEVICE_PROFILE_VERSION) {
        rc = bad(&p, "field 'version' is %.0f: this memest reads version %d", v, MEMEST_DEVICE_PROFILE_VERSION);
        goto end;
    }
    /* the name is kept whole in the message, cut to MemestGpu's 31 chars */
    char gname[256];
    if ((rc = string(&p, "name", true, gname, sizeof(gname))) < 0) goto end;
    snprintf(out->gpu.name, sizeof(out->gpu.name), "%.*s", (int)sizeof(out->gpu.name) - 1, gname);
    if ((rc = number(&p, "memory_bytes", true, true, &v)) < 0) goto end;
    out->gpu.memory = (uint64_t)v;
    if ((rc = number(&p, "bandwidth_bytes_per_s", false, true, &v)) < 0) goto end;
    out->gpu.bandwidth = v;
    if ((rc = number(&p, "fp32_flops", false, true, &v)) < 0) goto end;
    out->gpu.fp32_flops = v;
    if ((rc = number(&p, "fp16_flops", false, false, &v)) < 0) goto end; /* 0: no tensor cores */
    out->gpu.fp16_flops = v;
    if ((rc = number(&p, "sms", true, true, &v)) < 0) goto end;
    if (v > 1e6) {
        rc = bad(&p, "field 'sms' is %.0f, not a plausible SM count", v);
        goto end;
    }
    out->gpu.sms = (int)v;
    if ((rc = number(&p, "cuda_context_bytes", true, false, &v)) < 0) goto end;
    out->cuda_context_bytes = (uint64_t)v;
    if ((rc = number(&p, "allocation_granularity", true, true, &v)) < 0) goto end;
    out->allocation_granularity = (uint64_t)v;
    if ((rc = number(&p, "cublas_workspace_bytes", true, false, &v)) < 0) goto end;
    out->cublas_workspace_bytes = (uint64_t)v;
    if ((rc = string(&p, "measured", false, out->measured, sizeof(out->measured))) < 0) goto end;
end:
    cJSON_Delete(root);
    return rc;
}

int memest_device_profile_load(const char *path, MemestDeviceProfile *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err && errlen) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return MEMEST_ERR_IO;
    }
    char *buf = me_malloc(MAX_PROFILE_BYTES + 1);
    if (!buf) {
        fclose(f);
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return MEMEST_ERR_NOMEM;
    }
    size_t n = fread(buf, 1, MAX_PROFILE_BYTES + 1, f);
    int rd_err = ferror(f);
    fclose(f);
    int rc;
    if (rd_err) {
        if (err && errlen) snprintf(err, errlen, "%s: read error", path);
        rc = MEMEST_ERR_IO;
    } else if (n > MAX_PROFILE_BYTES) {
        if (err && errlen) snprintf(err, errlen, "%s: larger than %d bytes, not a device profile", path, MAX_PROFILE_BYTES);
        rc = MEMEST_ERR_INVALID;
    } else if (memchr(buf, 0, n)) {
        if (err && errlen) snprintf(err, errlen, "%s: contains NUL bytes, not a JSON device profile", path);
        rc = MEMEST_ERR_INVALID;
    } else {
        buf[n] = 0;
        rc = memest_device_profile_parse(buf, path, out, err, errlen);
    }
    me_free(buf);
    return rc;
}

