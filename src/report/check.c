/* Golden checks: this analysis against a JSON report written earlier
 * (memest --format json, or memest_write_golden). Both sides go through the
 * same JSON report, so the figures compared are exactly the ones a user
 * reads, and a field added to the report needs no change here. Notes
 * (memest_note_text) are not compared: they are facts about the file, not
 * figures that move within a tolerance (doc/report-schema.md). */
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

#define TWO53 9007199254740992.0

/* A count exactly as the report writes it: a whole number from 0 to 2^53,
 * or a decimal string (no sign, no leading zero) above 2^53 that fits 64
 * bits. Anything else in a figure's place (negative, fractional, huge,
 * a short string, null) is not a figure memest wrote. */
static bool count_of(const cJSON *it, uint64_t *v)
{
    if (cJSON_IsNumber(it)) {
        double d = it->valuedouble;
        if (!(d >= 0 && d <= TWO53) || d != (double)(uint64_t)d) return false;
        *v = (uint64_t)d;
        return true;
    }
    if (!cJSON_IsString(it) || !it->valuestring[0] || it->valuestring[0] == '0' ||
        strspn(it->valuestring, "0123456789") != strlen(it->valuestring))
        return false;
    errno = 0;
    unsigned long long u = strtoull(it->valuestring, NULL, 10);
    if (errno || (double)u <= TWO53) return false;
    *v = u;
    return true;
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : "";
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

/* A figure key of both objects (validated before: a value present is a
 * count); one side without it is a moved figure, whichever side. */
static void compare_key(Cmp *c, const char *what, const cJSON *gold, const cJSON *cur, const char *key)
{
    uint64_t a, b;
    bool ga = count_of(cJSON_GetObjectItemCaseSensitive(gold, key), &a);
    bool cb = count_of(cJSON_GetObjectItemCaseSensitive(cur, key), &b);
    if (!ga && !cb) return;
    char name[512];
    snprintf(name, sizeof(name), "%s%s", what, key);
    if (!cb) {
        c->compared++;
        say(c, "%s: %llu -> (absent in this run)\n", name, (unsigned long long)a);
    } else if (!ga) {
        c->compared++;
        say(c, "%s: (absent in the golden) -> %llu\n", name, (unsigned long long)b);
    } else {
        figure(c, name, a, b);
    }
}

/* Every key of both objects that holds a figure, golden's order first. */
static void compare_all_keys(Cmp *c, const char *what, const cJSON *gold, const cJSON *cur)
{
    for (const cJSON *it = cJSON_IsObject(gold) ? gold->child : NULL; it; it = it->next)
        if (it->string) compare_key(c, what, gold, cur, it->string);
    for (const cJSON *it = cJSON_IsObject(cur) ? cur->child : NULL; it; it = it->next)
        if (it->string && !cJSON_GetObjectItemCaseSensitive(gold, it->string)) compare_key(c, what, gold, cur, it->string);
}


static const char *const layer_keys[] = { "params", "macs", "madd", "flops", "mem_read", "mem_write", "output_bytes" };

static void compare_layer(Cmp *c, int idx, const cJSON *gold, const cJSON *cur)
{
    char what[320], name[208];
    snprintf(what, sizeof(what), "layers[%d] %s ", idx, me_escape(str_of(gold, "name"), name, sizeof(name)));
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
        char name[208];
        if (removed) {
            c->compared++;
            say(c, "layers[%d] %s: removed (in the golden, not in this run)\n", i, me_escape(str_of(g[i], "name"), name, sizeof(name)));
            i++;
        } else {
            c->compared++;
            say(c, "layers[%d] %s: added (in this run, not in the golden)\n", j, me_escape(str_of(k[j], "name"), name, sizeof(name)));
            j++;
        }
    }
    me_free(g);
    me_free(k);
    return 0;
}

/* The figures of a memory step: the top-level counts and at_peak's. */
static void compare_step(Cmp *c, int s, const cJSON *gs, const cJSON *cs)
{
    char what[64];
    snprintf(what, sizeof(what), "memory.steps[%d].", s);
    compare_all_keys(c, what, gs, cs);
    snprintf(what, sizeof(what), "memory.steps[%d].at_peak.", s);
    compare_all_keys(c, what, cJSON_GetObjectItemCaseSensitive(gs, "at_peak"), cJSON_GetObjectItemCaseSensitive(cs, "at_peak"));
}

/* Memory on one side only, or steps on one side only, are moved figures:
 * a golden without them must not pass a run that has them. */
static void compare_memory(Cmp *c, const cJSON *gm, const cJSON *cm)
{
    if (!cJSON_IsObject(gm) && !cJSON_IsObject(cm)) return;
    if (!cJSON_IsObject(gm) || !cJSON_IsObject(cm)) {
        c->compared++;
        say(c, "memory: %s\n", cJSON_IsObject(gm) ? "in the golden, not simulated in this run" : "simulated in this run, not in the golden");
        return;
    }
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(gm, "steps"), *cs = cJSON_GetObjectItemCaseSensitive(cm, "steps");
    int ng = cJSON_IsArray(gs) ? cJSON_GetArraySize(gs) : 0, nc = cJSON_IsArray(cs) ? cJSON_GetArraySize(cs) : 0;
    for (int s = 0; s < ng || s < nc; s++) {
        if (s < ng && s < nc) {
            compare_step(c, s, cJSON_GetArrayItem(gs, s), cJSON_GetArrayItem(cs, s));
            continue;
        }
        c->compared++;
        say(c, "memory.steps[%d]: %s\n", s, s < ng ? "in the golden, not in this run" : "in this run, not in the golden");
    }
}

/* The settings both reports were made with: figures of different setups
 * are not comparable, so a difference is an error naming the setting, not
 * a list of moved figures. Absent keys read as the defaults the report
 * leaves out (one GPU, no sharding, no GPU given). */
static const char *setup_text(const cJSON *o, const char *key, const char *absent, char *buf, size_t n)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(it)) return it->valuestring;
    if (cJSON_IsNumber(it)) {
        snprintf(buf, n, "%g", it->valuedouble);
        return buf;
    }
    if (!it) return absent;
    char *p = cJSON_PrintUnformatted(it);
    snprintf(buf, n, "%s", p ? p : "?");
    cJSON_free(p);
    return buf;
}

static int compare_setup(const cJSON *gold, const cJSON *cur, const char *path, char *err, size_t errlen)
{
    static const struct { const char *obj, *key, *absent; } setup[] = {
        { NULL, "inputs", "[]" },  /* names, dtypes and shapes: batch, --dtype, --input */
        { "memory", "mode", "" }, { "memory", "optimizer", "" }, { "memory", "loss", "" },
        { "memory", "runtime", "" }, { "memory", "autocast", "" }, { "memory", "gpus", "1" },
        { "memory", "shard", "none" }, { "device", "gpu", "(none)" },
    };
    for (size_t k = 0; k < sizeof(setup) / sizeof(setup[0]); k++) {
        const cJSON *go = setup[k].obj ? cJSON_GetObjectItemCaseSensitive(gold, setup[k].obj) : gold;
        const cJSON *co = setup[k].obj ? cJSON_GetObjectItemCaseSensitive(cur, setup[k].obj) : cur;
        /* a side without memory at all is compared as moved figures */
        if (setup[k].obj && !strcmp(setup[k].obj, "memory") && (!cJSON_IsObject(go) || !cJSON_IsObject(co))) continue;
        char a[256], b[256], ea[300], eb[300];
        const char *ga = setup_text(go, setup[k].key, setup[k].absent, a, sizeof(a));
        const char *cb = setup_text(co, setup[k].key, setup[k].absent, b, sizeof(b));
        if (strcmp(ga, cb))
            return fail(err, errlen, ME_EINVAL,
                        "golden file %s: made with another setup: %s%s%s is %s there, %s in this run (a golden compares "
                        "runs with the same options)",
                        path, setup[k].obj ? setup[k].obj : "", setup[k].obj ? "." : "", setup[k].key,
                        me_escape(ga, ea, sizeof(ea)), me_escape(cb, eb, sizeof(eb)));
    }
    return 0;
}

/* Every figure the golden holds must be one memest could have written;
 * else the check would compare nothing (or garbage) and pass. */
static int bad_figure(const cJSON *o, const char *where, const char *key, const char *path, char *err, size_t errlen)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    uint64_t v;
    if (!it || count_of(it, &v)) return 0;
    char *p = cJSON_PrintUnformatted(it), shown[80];
    me_escape(p ? p : "?", shown, sizeof(shown));
    cJSON_free(p);
    return fail(err, errlen, ME_EINVAL,
                "golden file %s: %s%s is %s, not a figure memest writes (a whole number from 0 to 2^53, or a "
                "decimal string above)",
                path, where, key, shown);
}

static int validate_all(const cJSON *o, const char *where, const char *path, char *err, size_t errlen)
{
    if (o && !cJSON_IsObject(o))
        return fail(err, errlen, ME_EINVAL, "golden file %s: %s is not an object", path, where);
    for (const cJSON *it = o ? o->child : NULL; it; it = it->next) {
        int rc = it->string ? bad_figure(o, where, it->string, path, err, errlen) : 0;
        if (rc < 0) return rc;
    }
    return 0;
}

static const char *const step_text_keys[] = { "peak_at", "peak_phase", "at_peak" };

static int validate_golden(const cJSON *gold, const char *path, char *err, size_t errlen)
{
    int rc = validate_all(cJSON_GetObjectItemCaseSensitive(gold, "totals"), "totals.", path, err, errlen);
    char where[64];
    int i = 0;
    for (const cJSON *l = cJSON_GetObjectItemCaseSensitive(gold, "layers")->child; l && rc >= 0; l = l->next, i++) {
        snprintf(where, sizeof(where), "layers[%d].", i);
        if (!cJSON_IsObject(l)) return fail(err, errlen, ME_EINVAL, "golden file %s: layers[%d] is not an object", path, i);
        for (size_t k = 0; k < sizeof(layer_keys) / sizeof(layer_keys[0]) && rc >= 0; k++)
            rc = bad_figure(l, where, layer_keys[k], path, err, errlen);
    }
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(gold, "memory");
    if (rc < 0 || !mem) return rc;
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(mem, "steps");
    if (!cJSON_IsObject(mem) || (steps && !cJSON_IsArray(steps)))
        return fail(err, errlen, ME_EINVAL, "golden file %s: %s is not %s", path, cJSON_IsObject(mem) ? "memory.steps" : "memory",
                    cJSON_IsObject(mem) ? "an array" : "an object");
    i = 0;
    for (const cJSON *st = steps ? steps->child : NULL; st && rc >= 0; st = st->next, i++) {
        if (!cJSON_IsObject(st)) return fail(err, errlen, ME_EINVAL, "golden file %s: memory.steps[%d] is not an object", path, i);
        snprintf(where, sizeof(where), "memory.steps[%d].", i);
        for (const cJSON *it = st->child; it && rc >= 0; it = it->next) {
            bool text = false;
            for (size_t k = 0; k < sizeof(step_text_keys) / sizeof(step_text_keys[0]); k++)
                text |= it->string && !strcmp(it->string, step_text_keys[k]);
            if (!text && it->string) rc = bad_figure(st, where, it->string, path, err, errlen);
        }
        snprintf(where, sizeof(where), "memory.steps[%d].at_peak.", i);
        if (rc >= 0) rc = validate_all(cJSON_GetObjectItemCaseSensitive(st, "at_peak"), where, path, err, errlen);
    }
    return rc;
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
    if ((rc = validate_golden(gold, golden_path, err, errlen)) < 0) goto end;
    if ((rc = current_report(model, &cur)) < 0) {
        fail(err, errlen, rc, "golden check: out of memory");
        goto end;
    }
    if ((rc = compare_setup(gold, cur, golden_path, err, errlen)) < 0) goto end;
    Cmp c = { out, tolerance_pct, 0, 0 };
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cur, "totals");
    compare_all_keys(&c, "totals.", gt, ct);
    if ((rc = compare_layers(&c, gl, cJSON_GetObjectItemCaseSensitive(cur, "layers"))) < 0) {
        fail(err, errlen, rc, "golden check: out of memory");
        goto end;
    }
    compare_memory(&c, cJSON_GetObjectItemCaseSensitive(gold, "memory"), cJSON_GetObjectItemCaseSensitive(cur, "memory"));
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
