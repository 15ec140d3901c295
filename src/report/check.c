/* Golden checks: this analysis against a JSON report written earlier
 * (memest --format json, or memest_write_golden). Both sides go through the
 * same JSON report, so the figures compared are exactly the ones a user
 * reads, and a field added to the report needs no change here. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "util.h"

#define GOLDEN_NOTE "a regression reference, not truth"

static int fail(char *err, size_t errlen, int code, const char *fmt, ...) ME_PRINTF(4, 5);
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* This analysis as the JSON report, parsed. */
static int current_report(const MemestAnalysis *m, cJSON **out)
{
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return ME_ENOMEM;
    int rc = me_report_json(m, f);
    if (fclose(f) != 0 && rc >= 0) rc = ME_ENOMEM;
    if (rc >= 0) {
        *out = cJSON_Parse(buf);
        if (!*out) rc = ME_ENOMEM;
    }
    free(buf); /* open_memstream's buffer comes from libc's malloc */
    return rc;
}

static int read_file(const char *path, char **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, ME_EIO, "golden file %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 4096) {
            if (cap > SIZE_MAX / 2 - 4096) { fclose(f); me_free(buf); return ME_ENOMEM; }
            char *nb = me_realloc(buf, cap * 2 + 4096);
            if (!nb) { fclose(f); me_free(buf); return ME_ENOMEM; }
            buf = nb;
            cap = cap * 2 + 4096;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        me_free(buf);
        return fail(err, errlen, ME_EIO, "golden file %s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    return 0;
}

/* A count as the report writes it: a number, or a decimal string above 2^53. */
static bool count_of(const cJSON *it, uint64_t *v)
{
    if (cJSON_IsNumber(it)) {
        if (!(it->valuedouble >= 0) || it->valuedouble >= 18446744073709551616.0) return false;
        *v = (uint64_t)it->valuedouble;
        return true;
    }
    if (!cJSON_IsString(it) || !it->valuestring[0] || strspn(it->valuestring, "0123456789") != strlen(it->valuestring))
        return false;
    errno = 0;
    unsigned long long u = strtoull(it->valuestring, NULL, 10);
    if (errno) return false;
    *v = u;
    return true;
}

typedef struct Cmp {
    FILE *out;
    double tol;     /* percent */
    int compared, moved;
} Cmp;

#define CHECK_SHOWN 100
static void say(Cmp *c, const char *fmt, ...) ME_PRINTF(2, 3);
static void say(Cmp *c, const char *fmt, ...)
{
    /* a changed model can move every layer: the first lines say enough */
    if (++c->moved > CHECK_SHOWN || !c->out) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(c->out, fmt, ap);
    va_end(ap);
}

static void figure(Cmp *c, const char *what, uint64_t old, uint64_t now)
{
    c->compared++;
    uint64_t d = now > old ? now - old : old - now;
    /* from zero, any change is a move: no percentage exists */
    if (old ? !((double)d > c->tol / 100.0 * (double)old) : !d) return;
    if (!old) {
        say(c, "%s: 0 -> %llu (was 0)\n", what, (unsigned long long)now);
        return;
    }
    double pct = (double)d / (double)old * 100.0;
    say(c, "%s: %llu -> %llu (%+.2f%%)\n", what, (unsigned long long)old, (unsigned long long)now, now < old ? -pct : pct);
}

/* The golden's figure key in both objects; a figure gone from this run's
 * report is a change, one new in it is not (keys may be added). */
static void compare_key(Cmp *c, const char *what, const cJSON *gold, const cJSON *cur, const char *key)
{
    uint64_t a, b;
    if (!count_of(cJSON_GetObjectItemCaseSensitive(gold, key), &a)) return;
    char name[512];
    snprintf(name, sizeof(name), "%s%s", what, key);
    if (!count_of(cJSON_GetObjectItemCaseSensitive(cur, key), &b)) {
        c->compared++;
        say(c, "%s: %llu -> (absent)\n", name, (unsigned long long)a);
        return;
    }
    figure(c, name, a, b);
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : "";
}

static const char *const layer_keys[] = { "params", "macs", "madd", "flops", "mem_read", "mem_write", "output_bytes" };

static void compare_layer(Cmp *c, int idx, const cJSON *gold, const cJSON *cur)
{
    char what[320];
    snprintf(what, sizeof(what), "layers[%d] %.200s ", idx, str_of(gold, "name"));
    for (size_t k = 0; k < sizeof(layer_keys) / sizeof(layer_keys[0]); k++) compare_key(c, what, gold, cur, layer_keys[k]);
}

enum { LOOKAHEAD = 256 };

/* Index of the first row from i (within the look-ahead) whose node is name, or -1. */
static int find_node(const cJSON *const *rows, int i, int n, const char *name)
{
    for (int k = i; k < n && k < i + LOOKAHEAD; k++)
        if (!strcmp(str_of(rows[k], "node"), name)) return k;
    return -1;
}

/* Rows are matched in order by node name; where the names part, the shorter
 * run of rows that only one side has is taken as added or removed. */
static int compare_layers(Cmp *c, const cJSON *gl, const cJSON *cl)
{
    int ng = cJSON_GetArraySize(gl), nc = cJSON_GetArraySize(cl);
    const cJSON **g = me_malloc(sizeof(*g) * (size_t)(ng + 1)), **k = me_malloc(sizeof(*k) * (size_t)(nc + 1));
    if (!g || !k) {
        me_free(g);
        me_free(k);
        return ME_ENOMEM;
    }
    int n = 0;
    for (const cJSON *it = gl->child; it; it = it->next) g[n++] = it;
    n = 0;
    for (const cJSON *it = cl->child; it; it = it->next) k[n++] = it;
    int i = 0, j = 0;
    while (i < ng || j < nc) {
        if (i < ng && j < nc && !strcmp(str_of(g[i], "node"), str_of(k[j], "node"))) {
            compare_layer(c, i, g[i], k[j]);
            i++, j++;
            continue;
        }
        int jn = i < ng ? find_node((const cJSON *const *)k, j, nc, str_of(g[i], "node")) : -1;
        int in = j < nc ? find_node((const cJSON *const *)g, i, ng, str_of(k[j], "node")) : -1;
        bool removed = j >= nc || (i < ng && jn < 0) || (in >= 0 && jn >= 0 && in - i < jn - j);
        if (removed) {
            c->compared++;
            say(c, "layers[%d] %.200s: removed (in the golden, not in this run)\n", i, str_of(g[i], "name"));
            i++;
        } else {
            c->compared++;
            say(c, "layers[%d] %.200s: added (in this run, not in the golden)\n", j, str_of(k[j], "name"));
            j++;
        }
    }
    me_free(g);
    me_free(k);
    return 0;
}

static int compare_memory(Cmp *c, const cJSON *gm, const cJSON *cm, const char *path, char *err, size_t errlen)
{
    if (!cJSON_IsObject(gm)) return 0; /* the golden simulated nothing */
    if (!cJSON_IsObject(cm)) {
        c->compared++;
        say(c, "memory: in the golden, not simulated in this run\n");
        return 0;
    }
    /* peaks of different runs are not comparable: a setup error, not a move */
    static const char *const setup[] = { "mode", "optimizer", "loss", "runtime", "autocast" };
    for (size_t k = 0; k < sizeof(setup) / sizeof(setup[0]); k++)
        if (strcmp(str_of(gm, setup[k]), str_of(cm, setup[k])))
            return fail(err, errlen, ME_EINVAL,
                        "golden file %s: memory %s is \"%s\" there, \"%s\" in this run (use the golden's options)", path,
                        setup[k], str_of(gm, setup[k]), str_of(cm, setup[k]));
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(gm, "steps"), *cs = cJSON_GetObjectItemCaseSensitive(cm, "steps");
    int ng = cJSON_IsArray(gs) ? cJSON_GetArraySize(gs) : 0, nc = cJSON_IsArray(cs) ? cJSON_GetArraySize(cs) : 0;
    for (int s = 0; s < ng; s++) {
        char what[64];
        snprintf(what, sizeof(what), "memory.steps[%d].", s);
        if (s >= nc) {
            c->compared++;
            say(c, "memory.steps[%d]: in the golden, not in this run\n", s);
            continue;
        }
        compare_key(c, what, cJSON_GetArrayItem(gs, s), cJSON_GetArrayItem(cs, s), "peak");
    }
    return 0;
}

int memest_check_golden(const MemestAnalysis *model, const char *golden_path, double tolerance_pct, FILE *out,
                        char *err, size_t errlen)
{
    if (!model || !golden_path) return fail(err, errlen, ME_EINVAL, "golden check: no analysis to compare");
    if (me_analysis_current(model) < 0) return fail(err, errlen, ME_ESTALE, "golden check: %s", memest_strerror(ME_ESTALE));
    if (!(tolerance_pct >= 0) || tolerance_pct > 1e9)
        return fail(err, errlen, ME_EINVAL, "golden check: tolerance %g%% is not a percentage", tolerance_pct);
    char *text;
    int rc = read_file(golden_path, &text, err, errlen);
    if (rc < 0) return rc;
    cJSON *gold = cJSON_Parse(text);
    if (!gold) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= text && at <= text + strlen(text) ? (long)(at - text) : -1;
        me_free(text);
        return fail(err, errlen, ME_EINVAL, "golden file %s: not JSON (parse error near byte %ld)", golden_path, off);
    }
    me_free(text);
    cJSON *cur = NULL;
    const char *schema = str_of(gold, "schema");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(gold, "version");
    const cJSON *gt = cJSON_GetObjectItemCaseSensitive(gold, "totals"), *gl = cJSON_GetObjectItemCaseSensitive(gold, "layers");
    if (strcmp(schema, "memest-report")) {
        rc = fail(err, errlen, ME_EINVAL, "golden file %s: not a memest report (schema \"%s\")", golden_path, schema);
        goto end;
    }
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
        rc = fail(err, errlen, ME_EINVAL, "golden file %s: report version %g, this memest reads version 1", golden_path,
                  cJSON_IsNumber(ver) ? ver->valuedouble : 0.0);
        goto end;
    }
    if (strcmp(str_of(gold, "convention"), memest_convention_name(model->conv))) {
        rc = fail(err, errlen, ME_EINVAL, "golden file %s: made with convention %s, this run uses %s", golden_path,
                  str_of(gold, "convention"), memest_convention_name(model->conv));
        goto end;
    }
    if (!cJSON_IsObject(gt) || !cJSON_IsArray(gl)) {
        rc = fail(err, errlen, ME_EINVAL, "golden file %s: no \"%s\"", golden_path, cJSON_IsObject(gt) ? "layers" : "totals");
        goto end;
    }
    if ((rc = current_report(model, &cur)) < 0) {
        fail(err, errlen, rc, "golden check: out of memory");
        goto end;
    }
    Cmp c = { out, tolerance_pct, 0, 0 };
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cur, "totals");
    for (const cJSON *it = gt->child; it; it = it->next) compare_key(&c, "totals.", gt, ct, it->string);
    if ((rc = compare_layers(&c, gl, cJSON_GetObjectItemCaseSensitive(cur, "layers"))) < 0) {
        fail(err, errlen, rc, "golden check: out of memory");
        goto end;
    }
    rc = compare_memory(&c, cJSON_GetObjectItemCaseSensitive(gold, "memory"), cJSON_GetObjectItemCaseSensitive(cur, "memory"),
                        golden_path, err, errlen);
    if (rc < 0) goto end;
    if (out) {
        if (c.moved > CHECK_SHOWN) fprintf(out, "... (the first %d shown)\n", CHECK_SHOWN);
        if (c.moved) fprintf(out, "%d figure(s) moved beyond %.2f%%\n", c.moved, tolerance_pct);
        else fprintf(out, "golden check passed: %d figures within %.2f%%\n", c.compared, tolerance_pct);
    }
    rc = c.moved ? 1 : 0;
end:
    cJSON_Delete(gold);
    cJSON_Delete(cur);
    return rc;
}

/* The report with "golden" right after "memest" (the version), where a
 * reader meets it first. cJSON cannot insert into an object, so the items
 * move to a new one in order. Takes root; NULL when out of memory. */
static cJSON *with_label(cJSON *root, const char *note)
{
    cJSON *out = cJSON_CreateObject();
    bool ok = out != NULL;
    while (ok && root->child) {
        cJSON *it = cJSON_DetachItemViaPointer(root, root->child);
        if (!(ok = cJSON_AddItemToObject(out, it->string, it))) {
            cJSON_Delete(it);
            break;
        }
        if (!strcmp(it->string, "memest")) ok = cJSON_AddStringToObject(out, "golden", note) != NULL;
    }
    cJSON_Delete(root);
    if (!ok) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

int memest_write_golden(const MemestAnalysis *model, const char *path, char *err, size_t errlen)
{
    if (!model || !path) return fail(err, errlen, ME_EINVAL, "golden: no analysis to write");
    if (me_analysis_current(model) < 0) return fail(err, errlen, ME_ESTALE, "golden: %s", memest_strerror(ME_ESTALE));
    cJSON *root;
    int rc = current_report(model, &root);
    if (rc < 0) return fail(err, errlen, rc, "golden file %s: out of memory", path);
    char note[160];
    snprintf(note, sizeof(note), "made by memest %s with --update-golden: " GOLDEN_NOTE, memest_version());
    root = with_label(root, note);
    char *s = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!s) return fail(err, errlen, ME_ENOMEM, "golden file %s: out of memory", path);
    FILE *f = fopen(path, "w");
    if (!f) {
        rc = fail(err, errlen, ME_EIO, "golden file %s: %s", path, strerror(errno));
    } else {
        fputs(s, f);
        fputc('\n', f);
        bool bad = ferror(f) != 0;
        if (fclose(f) != 0 || bad) rc = fail(err, errlen, ME_EIO, "golden file %s: write error", path);
    }
    cJSON_free(s);
    return rc;
}
