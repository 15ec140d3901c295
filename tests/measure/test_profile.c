/* Device profiles (src/measure/profile.c): a good file, every field
 * missing in turn, wrong types, bad numbers, not a profile at all; and a
 * written profile reads back the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile.h"

#include "../check.h"

static const char *const fields[][2] = {
    { "format", "\"memest-device-profile\"" },
    { "version", "1" },
    { "name", "\"NVIDIA H100 80GB HBM3\"" },
    { "memory_bytes", "85045231616" },
    { "bandwidth_bytes_per_s", "2.9e12" },
    { "fp32_flops", "5.1e13" },
    { "fp16_flops", "7.4e14" },
    { "sms", "132" },
    { "cuda_context_bytes", "532676608" },
    { "allocation_granularity", "2097152" },
    { "cublas_workspace_bytes", "33554432" },
    { "measured", "\"2025-01-01T00:00:00Z, driver 12.4, CUDA runtime 13.0\"" },
};
#define N_FIELDS ((int)(sizeof(fields) / sizeof(fields[0])))

/* the good profile with field `skip` left out and field `over` set to `val` */
static void build(char *buf, size_t n, int skip, const char *over, const char *val)
{
    size_t o = (size_t)snprintf(buf, n, "{");
    int first = 1;
    for (int i = 0; i < N_FIELDS; i++) {
        if (i == skip) continue;
        const char *v = over && !strcmp(over, fields[i][0]) ? val : fields[i][1];
        o += (size_t)snprintf(buf + o, n - o, "%s\n  \"%s\": %s", first ? "" : ",", fields[i][0], v);
        first = 0;
    }
    snprintf(buf + o, n - o, "\n}\n");
}

static void expect_error(const char *text, const char *want, const char *what)
{
    MeDeviceProfile p;
    char err[512];
    int rc = me_device_profile_parse(text, "p.json", &p, err, sizeof(err));
    CHECK(rc == MEMEST_ERR_INVALID, "%s: expected an error, got %d", what, rc);
    CHECK(strstr(err, want) != NULL, "%s: message '%s' does not say '%s'", what, err, want);
    CHECK(!strncmp(err, "p.json: ", 8), "%s: message '%s' does not name the file", what, err);
}

int main(void)
{
    char text[4096], want[256];
    MeDeviceProfile p;
    char err[512];

    build(text, sizeof(text), -1, NULL, NULL);
    CHECK(me_device_profile_parse(text, "good.json", &p, err, sizeof(err)) == 0, "good profile: %s", err);
    CHECK(!strcmp(p.gpu.name, "NVIDIA H100 80GB HBM3"), "name '%s'", p.gpu.name);
    CHECK(p.gpu.memory == UINT64_C(85045231616), "memory %llu", (unsigned long long)p.gpu.memory);
    CHECK(p.gpu.bandwidth == 2.9e12 && p.gpu.fp32_flops == 5.1e13 && p.gpu.fp16_flops == 7.4e14, "rates");
    CHECK(p.gpu.sms == 132, "sms %d", p.gpu.sms);
    CHECK(p.cuda_context_bytes == 532676608 && p.allocation_granularity == 2097152 && p.cublas_workspace_bytes == 33554432, "sizes");
    CHECK(strstr(p.measured, "driver 12.4") != NULL, "measured '%s'", p.measured);

    /* every field but "measured" is required */
    for (int i = 0; i < N_FIELDS; i++) {
        build(text, sizeof(text), i, NULL, NULL);
        if (!strcmp(fields[i][0], "measured")) {
            CHECK(me_device_profile_parse(text, "p.json", &p, err, sizeof(err)) == 0, "without measured: %s", err);
            continue;
        }
        snprintf(want, sizeof(want), "field '%s' is missing", fields[i][0]);
        expect_error(text, want, fields[i][0]);
    }

    /* wrong types */
    static const char *const types[][3] = {
        { "memory_bytes", "\"80GB\"", "field 'memory_bytes' must be a number, got a string" },
        { "bandwidth_bytes_per_s", "null", "field 'bandwidth_bytes_per_s' must be a number, got null" },
        { "sms", "[132]", "field 'sms' must be a number, got a list" },
        { "fp32_flops", "true", "field 'fp32_flops' must be a number, got a boolean" },
        { "name", "5", "field 'name' must be a string, got a number" },
        { "measured", "{}", "field 'measured' must be a string, got an object" },
        { "format", "1", "field 'format' must be a string" },
        { "version", "\"1\"", "field 'version' must be a number, got a string" },
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        build(text, sizeof(text), -1, types[i][0], types[i][1]);
        expect_error(text, types[i][2], types[i][0]);
    }

    /* bad numbers */
    static const char *const nums[][3] = {
        { "memory_bytes", "-1", "field 'memory_bytes' must be positive, got -1" },
        { "memory_bytes", "0", "field 'memory_bytes' must be positive, got 0" },
        { "memory_bytes", "1.5", "must be a whole number" },
        { "memory_bytes", "1e300", "must be a whole number of at most 2^53" },
        { "bandwidth_bytes_per_s", "0", "field 'bandwidth_bytes_per_s' must be positive" },
        { "fp32_flops", "-5e12", "field 'fp32_flops' must be positive" },
        { "fp16_flops", "-1", "field 'fp16_flops' must not be negative" },
        { "sms", "0", "field 'sms' must be positive" },
        { "sms", "13.5", "field 'sms' must be a whole number" },
        { "sms", "5000000", "not a plausible SM count" },
        { "cuda_context_bytes", "-4096", "field 'cuda_context_bytes' must not be negative" },
        { "allocation_granularity", "0", "field 'allocation_granularity' must be positive" },
        { "cublas_workspace_bytes", "0.25", "must be a whole number" },
        { "bandwidth_bytes_per_s", "1e999", "not a finite number" },
        { "version", "2", "this memest reads version 1" },
        { "format", "\"memest-report\"", "not \"memest-device-profile\"" },
        { "name", "\"\"", "field 'name' must not be empty" },
    };
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        build(text, sizeof(text), -1, nums[i][0], nums[i][1]);
        expect_error(text, nums[i][2], nums[i][1]);
    }
    /* accepted edge values */
    build(text, sizeof(text), -1, "fp16_flops", "0");
    CHECK(me_device_profile_parse(text, "p.json", &p, err, sizeof(err)) == 0 && p.gpu.fp16_flops == 0, "fp16_flops 0: %s", err);
    build(text, sizeof(text), -1, "cuda_context_bytes", "0");
    CHECK(me_device_profile_parse(text, "p.json", &p, err, sizeof(err)) == 0, "context 0: %s", err);
    build(text, sizeof(text), -1, "name", "\"a GPU whose name is much longer than thirty-one characters\"");
    CHECK(me_device_profile_parse(text, "p.json", &p, err, sizeof(err)) == 0 && strlen(p.gpu.name) == 31, "long name cut to 31: '%s'",
          p.gpu.name);

    /* not a profile at all */
    expect_error("", "not JSON", "empty");
    expect_error("{\"format\": ", "not JSON", "truncated");
    expect_error("[1, 2]", "expected a JSON object, got a list", "list");
    expect_error("{} trailing", "not JSON", "trailing garbage");

    /* files: a missing one, a written one read back */
    char dir[] = "/tmp/memest-profile-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof(path), "%s/missing.json", dir);
    CHECK(me_device_profile_read(path, &p, err, sizeof(err)) == MEMEST_ERR_IO && strstr(err, "missing.json: cannot open"),
          "missing file: %s", err);
    snprintf(path, sizeof(path), "%s/written.json", dir);
    MeDeviceProfile w = { .gpu = { .name = "Test \"GPU\"\\1", .memory = UINT64_C(25769803776), .bandwidth = 9.36e11,
                                   .fp32_flops = 3.56e13, .fp16_flops = 7.1e13, .sms = 82 },
                          .cuda_context_bytes = 300 << 20, .allocation_granularity = 2 << 20, .cublas_workspace_bytes = 4 << 20,
                          .measured = "2025-01-01, driver 13.0" };
    FILE *f = fopen(path, "w");
    CHECK(f && me_device_profile_write(f, &w) == 0, "write");
    if (f) fclose(f);
    MemestGpu gpu;
    uint64_t ctx = 0, ws = 0;
    CHECK(me_device_profile_load(path, &gpu, &ctx, &ws, err, sizeof(err)) == 0, "read back: %s", err);
    CHECK(!strcmp(gpu.name, w.gpu.name) && gpu.memory == w.gpu.memory && gpu.sms == 82, "read back gpu");
    CHECK(gpu.bandwidth > 9.3599e11 && gpu.bandwidth < 9.3601e11 && gpu.fp16_flops > 7.09e13, "read back rates");
    CHECK(ctx == (300u << 20) && ws == (4u << 20), "read back context %llu workspace %llu", (unsigned long long)ctx,
          (unsigned long long)ws);
    CHECK(me_device_profile_load(path, NULL, NULL, NULL, err, sizeof(err)) == 0, "NULL outputs");
    CHECK(me_device_profile_read(path, &p, err, sizeof(err)) == 0 && !strcmp(p.measured, w.measured), "measured round trip");
    unlink(path);
    rmdir(dir);

    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
