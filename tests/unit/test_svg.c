/* memest_plot_svg: resnet18's training timeline plotted with a 24 GiB
 * capacity line; the SVG is rendered with rsvg-convert when it is there
 * (librsvg2-bin), so a file a renderer rejects fails the test.
 * Usage: test_svg SOURCE_ROOT. Exit 77 (meson: skipped) without rsvg-convert. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memest/memest.h"
#include "model.h"

#include "../check.h"

static char dir[256];

static int plot(const MemestAnalysis *m, const char *path, uint64_t gpu, const char *name)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int rc = memest_plot_svg(m, f, gpu, name);
    if (fclose(f) != 0 && rc >= 0) rc = -1;
    return rc;
}

/* the model in *model, its analysis returned */
static MemestAnalysis *load(const char *path, MemestRunMode mode, MemestModel **model)
{
    MemestModel *m = NULL;
    MemestAnalysis *a = NULL;
    MemestLoadSettings ls = { 0 };
    MemestAnalyzeSettings as = { 0 };
    MemestMemorySettings ms = { 0 };
    char err[1024];
    *model = NULL;
    if (memest_model_load(&m, path, &ls, err, sizeof(err)) < 0 || memest_analyze(m, &as, &a, err, sizeof(err)) < 0) {
        printf("FAIL: %s\n", err);
        fails++;
        memest_model_free(&m);
        return NULL;
    }
    ms.mode = mode;
    ms.runtime = MEMEST_RUNTIME_CUDA;
    ms.record_series = 1;
    if (memest_set_memory(a, &ms, err, sizeof(err)) < 0) {
        printf("FAIL: %s\n", err);
        fails++;
        memest_analysis_free(&a);
        memest_model_free(&m);
    }
    *model = m;
    return a;
}

/* Renders svg to png; 0 when the PNG's size is the SVG's. */
static int render(const char *svg, const char *png, int want_w, int want_h)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "rsvg-convert -o '%s' '%s'", png, svg);
    if (system(cmd) != 0) {
        printf("FAIL: rsvg-convert could not render %s\n", svg);
        return -1;
    }
    size_t n;
    unsigned char *p = (unsigned char *)slurp(png, &n);
    static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
    int rc = -1;
    if (!p || n < 24 || memcmp(p, sig, 8) || memcmp(p + 12, "IHDR", 4)) {
        printf("FAIL: %s is not a PNG\n", png);
    } else {
        int w = (int)((uint32_t)p[16] << 24 | (uint32_t)p[17] << 16 | (uint32_t)p[18] << 8 | p[19]);
        int h = (int)((uint32_t)p[20] << 24 | (uint32_t)p[21] << 16 | (uint32_t)p[22] << 8 | p[23]);
        if (w != want_w || h != want_h) printf("FAIL: PNG is %dx%d, the SVG %dx%d\n", w, h, want_w, want_h);
        else rc = 0;
    }
    free(p);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_svg SOURCE_ROOT\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/memest-svg-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char model[1024], svg[512], svg2[512], png[512], odd[512], odd_svg[512], odd_png[512];
    snprintf(model, sizeof(model), "%s/models/resnet18.json", argv[1]);
    snprintf(svg, sizeof(svg), "%s/plot.svg", dir);
    snprintf(svg2, sizeof(svg2), "%s/again.svg", dir);
    snprintf(png, sizeof(png), "%s/plot.png", dir);
    snprintf(odd, sizeof(odd), "%s/odd&<model>.json", dir);
    snprintf(odd_svg, sizeof(odd_svg), "%s/odd.svg", dir);
    snprintf(odd_png, sizeof(odd_png), "%s/odd.png", dir);
    const uint64_t gib24 = UINT64_C(24) << 30;
    int sw = 0, sh = 0;
    char *text = NULL, *again = NULL, *otext = NULL;

    /* without a recorded timeline there is nothing to plot */
    MemestModel *mo = NULL;
    MemestAnalysis *m = NULL;
    MemestLoadSettings ls = { 0 };
    MemestAnalyzeSettings as = { 0 };
    char err[1024];
    if (memest_model_load(&mo, model, &ls, err, sizeof(err)) == 0 && memest_analyze(mo, &as, &m, err, sizeof(err)) == 0) {
        FILE *f = fopen(svg, "w");
        CHECK(f && memest_plot_svg(m, f, 0, NULL) < 0, "a model without a timeline plots");
        if (f) fclose(f);
    } else {
        CHECK(0, "%s", err);
    }
    memest_analysis_free(&m);
    memest_model_free(&mo);

    m = load(model, MEMEST_RUN_TRAIN, &mo);
    if (!m) goto end;
    CHECK(plot(m, svg, gib24, "rtx3090") == 0, "memest_plot_svg failed");
    CHECK(plot(m, svg2, gib24, "rtx3090") == 0, "memest_plot_svg failed");
    text = slurp(svg, NULL);
    again = slurp(svg2, NULL);
    CHECK(text && !strncmp(text, "<svg", 4), "the SVG does not start with <svg");
    if (!text) goto end;
    CHECK(again && !strcmp(text, again), "two plots of the same model differ");
    CHECK(strstr(text, "peak "), "no peak label");
    CHECK(strstr(text, "rtx3090 24 GiB"), "no capacity line labelled 'rtx3090 24 GiB'");
    CHECK(strstr(text, ">backward<") && strstr(text, ">forward<"), "phases not named");
    CHECK(strstr(text, ">activation_grads<"), "no legend");
    CHECK(strstr(text, "models/resnet18.json") && strstr(text, "training"), "title names neither model nor mode");
    {
        /* the label is the one the table prints for the plotted step */
        const MemestMemory *r = &m->memory.mem[m->memory.n_mem - 1];
        char want[256];
        snprintf(want, sizeof(want), "peak %.2f MiB at %s (backward)", (double)r->peak_allocated / (1 << 20), r->peak_name);
        CHECK(r->peak_phase == MEMEST_PHASE_BACKWARD && strstr(text, want), "no '%s'", want);
    }
    CHECK(sscanf(text, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\"", &sw, &sh) == 2,
          "no width/height on <svg>");
    memest_analysis_free(&m);
    memest_model_free(&mo);

    /* names with XML's special characters, in the path and in a layer */
    FILE *f = fopen(odd, "w");
    if (f) {
        fputs("{\"format\": \"memest-graph\", \"version\": 1, \"inputs\": [{\"name\": \"x\", \"shape\": [256]}],\n"
              " \"layers\": [{\"name\": \"fc<&>\\\"'1\", \"type\": \"Linear\", \"in_features\": 256, \"out_features\": 4096},\n"
              "  {\"name\": \"act\", \"type\": \"ReLU\"},\n"
              "  {\"name\": \"fc2\", \"type\": \"Linear\", \"in_features\": 4096, \"out_features\": 10}]}\n", f);
        fclose(f);
    }
    m = load(odd, MEMEST_RUN_TRAIN, &mo);
    if (m) {
        CHECK(plot(m, odd_svg, 0, NULL) == 0, "memest_plot_svg failed on odd names");
        otext = slurp(odd_svg, NULL);
        CHECK(otext && strstr(otext, "odd&amp;&lt;model&gt;.json"), "path not escaped");
        CHECK(otext && !strstr(otext, "<&") && !strstr(otext, "GiB"), "raw '<&' in the SVG, or a capacity line without a GPU");
        memest_analysis_free(&m);
        memest_model_free(&mo);
    }

    if (system("command -v rsvg-convert >/dev/null 2>&1") != 0) {
        printf("rsvg-convert not found (apt-get install librsvg2-bin): the SVG was not rendered\n");
        if (!fails) fails = -1;
        goto end;
    }
    CHECK(render(svg, png, sw, sh) == 0, "resnet18 plot did not render");
    CHECK(render(odd_svg, odd_png, sw, sh) == 0, "odd-name plot did not render");

end:
    free(text);
    free(again);
    free(otext);
    const char *files[] = { svg, svg2, png, odd, odd_svg, odd_png };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) unlink(files[i]);
    rmdir(dir);
    if (fails < 0) return 77;
    printf("%s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
