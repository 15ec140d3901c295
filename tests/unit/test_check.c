/* Golden checks: memest_write_golden then memest_check_golden on resnet18,
 * with the golden edited by hand (cJSON) to move figures; and the Netron
 * metrics file of the same analysis. Usage: test_check SOURCE_ROOT. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memest/memest.h"

#include "../check.h"

static cJSON *load_json(const char *path)
{
    char *s = slurp(path, NULL);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

static int save_json(const cJSON *j, const char *path)
{
    char *s = cJSON_Print(j);
    FILE *f = s ? fopen(path, "w") : NULL;
    int rc = f && fputs(s, f) >= 0 ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    cJSON_free(s);
    return rc;
}

/* memest_check_golden with its report captured; *text is malloc'd. */
static int check(const MemestAnalysis *m, const char *golden, double tol, char **text, char *err, size_t errlen)
{
    size_t len;
    *text = NULL;
    FILE *f = open_memstream(text, &len);
    if (!f) return -1000;
    err[0] = 0;
    int rc = memest_check_golden(m, golden, tol, f, err, errlen);
    fclose(f);
    return rc;
}

/* golden with a count scaled by factor (a number or, above 2^53, a string) */
static void scale(cJSON *obj, const char *key, double factor)
{
    cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    double v = cJSON_IsString(it) ? strtod(it->valuestring, NULL) : it ? it->valuedouble : 0;
    cJSON_ReplaceItemInObjectCaseSensitive(obj, key, cJSON_CreateNumber((double)(long long)(v * factor + 0.5)));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_check SOURCE_ROOT\n");
        return 2;
    }
    char dir[256], model[1024], golden[512], edited[512], missing[512], metrics[512], *out = NULL;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/memest-check-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(model, sizeof(model), "%s/models/resnet18.json", argv[1]);
    snprintf(golden, sizeof(golden), "%s/golden.json", dir);
    snprintf(edited, sizeof(edited), "%s/edited.json", dir);
    snprintf(missing, sizeof(missing), "%s/no-such-golden.json", dir);
    snprintf(metrics, sizeof(metrics), "%s/metrics.json", dir);

    MemestModel *mo = NULL;
    MemestAnalysis *m = NULL;
    MemestLoadSettings ls = { 0 };
    MemestAnalyzeSettings as = { 0 };
    MemestMemorySettings ms = { 0 };
    ms.record_series = 1;
    char err[1024];
    cJSON *g = NULL;
    if (memest_model_load(&mo, model, &ls, err, sizeof(err)) < 0 || memest_analyze(mo, &as, &m, err, sizeof(err)) < 0 ||
        memest_set_memory(m, &ms, err, sizeof(err)) < 0) {
        printf("FAIL: %s\n", err);
        fails++;
        goto end;
    }

    /* the golden is the JSON report plus its label */
    CHECK(memest_write_golden(m, golden, err, sizeof(err)) == 0, "write_golden: %s", err);
    g = load_json(golden);
    CHECK(g && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(g, "totals")), "the golden is not a JSON report");
    if (!g) goto end;
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(g, "golden");
    CHECK(cJSON_IsString(label) && strstr(label->valuestring, "not truth") && strstr(label->valuestring, memest_version()),
          "the golden is not labelled as made by memest");

    /* the same analysis passes */
    int rc = check(m, golden, 1, &out, err, sizeof(err));
    CHECK(rc == 0 && out && strstr(out, "golden check passed: ") && strstr(out, "within 1.00%"),
          "unchanged golden: rc %d, '%s' %s", rc, out ? out : "", err);
    free(out);

    /* totals.macs 5% lower in the golden: now +5.26%; moved at 1%, within 6% */
    cJSON *tot = cJSON_GetObjectItemCaseSensitive(g, "totals");
    scale(tot, "macs", 1 / 1.05);
    save_json(g, edited);
    rc = check(m, edited, 1, &out, err, sizeof(err));
    CHECK(rc == 1 && out && strstr(out, "totals.macs: ") && strstr(out, "(+5") && strstr(out, "1 figure(s) moved beyond 1.00%"),
          "macs +5%% at 1%%: rc %d, '%s' %s", rc, out ? out : "", err);
    free(out);
    rc = check(m, edited, 6, &out, err, sizeof(err));
    CHECK(rc == 0 && out && strstr(out, "golden check passed"), "macs +5%% at 6%%: rc %d, '%s' %s", rc, out ? out : "", err);
    free(out);

    /* a layer's params and a memory peak moved, a layer gone from the
     * golden (so added in this run); the rows after it still line up */
    scale(tot, "macs", 1.05);
    cJSON *layers = cJSON_GetObjectItemCaseSensitive(g, "layers");
    scale(cJSON_GetArrayItem(layers, 4), "params", 2);
    cJSON_DeleteItemFromArray(layers, 10);
    cJSON *steps = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g, "memory"), "steps");
    scale(cJSON_GetArrayItem(steps, 0), "peak", 0.5);
    save_json(g, edited);
    rc = check(m, edited, 1, &out, err, sizeof(err));
    CHECK(rc == 1 && out && strstr(out, "layers[4] layer1.0.conv1 params: 73728 -> 36864 (-50.00%)") &&
              strstr(out, ": added (in this run, not in the golden)") && strstr(out, "memory.steps[0].peak: ") &&
              strstr(out, "(+100.0") && strstr(out, "3 figure(s) moved"),
          "layer edits: rc %d, '%s' %s", rc, out ? out : "", err);
    free(out);

    /* errors: no file, not JSON, another convention */
    rc = check(m, missing, 1, &out, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, missing), "missing golden: rc %d, err '%s'", rc, err);
    free(out);
    FILE *f = fopen(edited, "w");
    if (f) {
        fputs("{ \"schema\": ", f);
        fclose(f);
    }
    rc = check(m, edited, 1, &out, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, edited) && strstr(err, "not JSON"), "broken golden: rc %d, err '%s'", rc, err);
    free(out);
    cJSON_ReplaceItemInObjectCaseSensitive(g, "convention", cJSON_CreateString("torchstat"));
    save_json(g, edited);
    rc = check(m, edited, 1, &out, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, "convention"), "other convention: rc %d, err '%s'", rc, err);
    free(out);

    /* Netron metrics: one entry per row, named as in the file */
    f = fopen(metrics, "w");
    CHECK(f && memest_netron_metrics(m, f) == 0, "netron metrics failed");
    if (f) fclose(f);
    cJSON *nm = load_json(metrics);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(nm, "metrics");
    CHECK(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == cJSON_GetArraySize(layers) + 1, "metrics: not one entry per row");
    const cJSON *e = cJSON_GetArrayItem(arr, 0);
    CHECK(e && !strcmp(cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring, "conv1") &&
              cJSON_GetObjectItemCaseSensitive(e, "params")->valuedouble == 9408 &&
              cJSON_GetObjectItemCaseSensitive(e, "macs")->valuedouble == 118013952 &&
              cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "flops")) &&
              cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "output_bytes")) &&
              cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "op")) &&
              cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "module")),
          "metrics[0] is not conv1's figures");
    cJSON_Delete(nm);

end:
    cJSON_Delete(g);
    memest_analysis_free(&m);
    memest_model_free(&mo);
    unlink(golden);
    unlink(edited);
    unlink(metrics);
    rmdir(dir);
    printf("%s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
