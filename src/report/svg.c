/* SVG of the memory timeline: live bytes over the events of one simulated
 * step, stacked by category. Self-contained (no fonts, scripts or links)
 * and deterministic: the same model and settings give the same bytes. */
#include <math.h>
#include <string.h>

#include "report/report.h"
#include "util.h"

enum {
    W = 1200, H = 600,
    PL = 90, PR = 930, PT = 96, PB = 528, /* plot area */
    LX = 952,                             /* legend column */
    MAX_X = 2000,                         /* x positions drawn at most */
    MIN_BAND = 4,                         /* narrowest phase band, px */
};

/* Fixed palette, one colour per MemestMemCategory (bottom of the stack first). */
static const char *const cat_color[MEMEST_MEM_COUNT] = {
    "#4e79a7", "#9c755f", "#f28e2b", "#e15759", "#59a14f",
    "#76b7b2", "#b07aa1", "#edc948", "#bab0ac", "#ff9da7", "#d4a6c8",
};
static const char *const phase_fill[3] = { "#e6eef8", "#fbebdc", "#e4f2e0" };

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static uint64_t total_of(const MemestSeriesPoint *p)
{
    uint64_t t = 0;
    for (int c = 0; c < MEMEST_MEM_COUNT; c++) t = me_sadd(t, p->live[c]);
    return t;
}

/* Length in bytes of the UTF-8 sequence at s, 0 if malformed: names come
 * from model files and an SVG renderer rejects invalid UTF-8 outright. */
static int utf8_len(const unsigned char *s)
{
    int n = *s < 0x80 ? 1 : (*s & 0xe0) == 0xc0 ? 2 : (*s & 0xf0) == 0xe0 ? 3 : (*s & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 2 && *s < 0xc2) return 0; /* overlong */
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

/* Text content or attribute value: XML's specials escaped, control
 * characters (not allowed in XML 1.0) and malformed bytes as '?'. */
static void xml_text(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        int n = utf8_len(p);
        if (!n || (n == 1 && *p < 0x20)) { fputc('?', f); p++; continue; }
        if (n == 1) {
            switch (*p) {
            case '&': fputs("&amp;", f); break;
            case '<': fputs("&lt;", f); break;
            case '>': fputs("&gt;", f); break;
            case '"': fputs("&quot;", f); break;
            case '\'': fputs("&apos;", f); break;
            default: fputc(*p, f);
            }
        } else {
            fwrite(p, 1, (size_t)n, f);
        }
        p += n;
    }
}

/* Rough width of text in a sans-serif face: nothing measures fonts here,
 * so label placement keeps a margin around this. */
static double text_w(const char *s, double size)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xc0) != 0x80;
    return (double)n * size * 0.58;
}

/* 1, 2 or 5 times a power of ten, about span/target. */
static double nice_step(double span, int target)
{
    double raw = span / target;
    if (!(raw > 0)) return 1;
    double mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

/* 24576 → "24,576"; fractions keep the digits the step needs. */
static void tick_label(double v, double step, char *buf, size_t n)
{
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 6) dec = 6;
    char tmp[64];
    snprintf(tmp, sizeof(tmp), "%.*f", dec, v);
    const char *dot = strchr(tmp, '.');
    int ilen = dot ? (int)(dot - tmp) : (int)strlen(tmp), o = 0;
    for (int i = 0; i < ilen && (size_t)o + 2 < n; i++) {
        if (i && (ilen - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    if (dot) snprintf(buf + o, n - (size_t)o, "%s", dot);
    else buf[o] = 0;
}

/* 24 GiB → "24", 79.6 GiB → "79.6" */
static void gib_text(uint64_t b, char *buf, size_t n)
{
    snprintf(buf, n, "%.2f", (double)b / (1024.0 * 1024.0 * 1024.0));
    char *e = buf + strlen(buf) - 1;
    while (*e == '0') *e-- = 0;
    if (*e == '.') *e = 0;
}

typedef struct Box { double x0, y0, x1, y1; } Box;

static bool overlaps(const Box *a, const Box *b)
{
    return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* Label text with a white halo so it stays readable over the areas. */
static void label(FILE *f, double x, double y, const char *anchor, const char *style, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" %s stroke=\"#ffffff\" stroke-width=\"3\" "
               "stroke-linejoin=\"round\" paint-order=\"stroke\">", x, y, anchor, style);
    xml_text(f, s);
    fputs("</text>\n", f);
}

int memest_plot_svg(const MemestAnalysis *model, FILE *f, uint64_t gpu_bytes, const char *gpu_name)
{
    if (!model || !f) return ME_EINVAL;
    if (me_analysis_current(model) < 0) return ME_ESTALE;
    if (!model->has_memory || model->memory.n_mem <= 0 || !model->memory.settings.record_series) return ME_EINVAL;
    const int step = model->memory.n_mem - 1;
    const MemestSeriesPoint *pts;
    int n;
    if (memest_memory_series(model, step, &pts, &n) < 0 || n <= 0) return ME_EINVAL;
    const MemestMemory *mem = &model->memory.mem[step];
    const MemestMemorySettings *ms = &model->memory.settings;

    /* The first event at the highest total: the one the simulation reports
     * as its peak. */
    int peak_i = 0;
    uint64_t peak_total = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t = total_of(&pts[i]);
        if (t > peak_total) { peak_total = t; peak_i = i; }
    }

    /* Down-sampling: each bucket shows its highest event, whole, so the
     * stack stays a real state of memory and the peak's bucket shows the
     * peak exactly. */
    int nb = n < MAX_X ? n : MAX_X;
    int *pick = me_malloc(sizeof(int) * (size_t)nb);
    if (!pick) return ME_ENOMEM;
    for (int b = 0; b < nb; b++) {
        int lo = (int)((int64_t)b * n / nb), hi = (int)((int64_t)(b + 1) * n / nb);
        int best = lo;
        uint64_t bt = total_of(&pts[lo]);
        for (int i = lo + 1; i < hi; i++) {
            uint64_t t = total_of(&pts[i]);
            if (t > bt) { bt = t; best = i; }
        }
        if (peak_i >= lo && peak_i < hi) best = peak_i;
        pick[b] = best;
    }
    bool used[MEMEST_MEM_COUNT] = { false };
    for (int i = 0; i < n; i++)
        for (int c = 0; c < MEMEST_MEM_COUNT; c++) used[c] |= pts[i].live[c] != 0;

    /* y axis in MiB, from 0 to a tick above the data: a 3 GB curve scaled
     * to an 80 GB card would be a strip. The capacity is drawn as a line
     * when it is near enough to share the scale, else as a marker on the
     * top edge saying how far above it is. */
    bool gpu_on_scale = gpu_bytes && (double)gpu_bytes <= 1.5 * (double)peak_total;
    double top_mib = mib(gpu_on_scale && gpu_bytes > peak_total ? gpu_bytes : peak_total);
    if (!(top_mib > 0)) top_mib = 1;
    double ystep = nice_step(top_mib * 1.04, 6);
    double ymax = ceil(top_mib * 1.04 / ystep) * ystep;
    const double pw = PR - PL, ph = PB - PT;
#define XE(i) (PL + (double)(i) * pw / n)          /* left edge of event i */
#define BLO(b) ((int64_t)(b) * n / nb)              /* first event of bucket b */
#define YM(v) (PB - (v) / ymax * ph)               /* v in MiB */

    /* no XML declaration: UTF-8 is XML's default, and the file starts "<svg" */
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);

    /* title: model and mode */
    char buf[512];
    fputs("<text x=\"20\" y=\"28\" font-size=\"16\" font-weight=\"bold\">Memory timeline: ", f);
    xml_text(f, model->g->path);
    fputs("</text>\n", f);
    int o = snprintf(buf, sizeof(buf), "%s", me_mode_name(ms));
    if (ms->mode == MEMEST_RUN_TRAIN)
        o += snprintf(buf + o, sizeof(buf) - (size_t)o, ", %s, loss %s", me_optimizer_name(ms->optimizer),
                      memest_loss_name(ms->loss));
    if (ms->amp) o += snprintf(buf + o, sizeof(buf) - (size_t)o, ", autocast %s", ms->amp == 2 ? "bf16" : "fp16");
    if (mem->segments) o += snprintf(buf + o, sizeof(buf) - (size_t)o, ", %d checkpointed segments", mem->segments);
    if (model->memory.n_mem > 1) o += snprintf(buf + o, sizeof(buf) - (size_t)o, ", step %d of %d (steady state)", step + 1, model->memory.n_mem);
    if (ms->gpus > 1)
        o += snprintf(buf + o, sizeof(buf) - (size_t)o, ", per GPU of %d (%s)", ms->gpus, me_shard_name(ms->shard));
    snprintf(buf + o, sizeof(buf) - (size_t)o, ", runtime %s", ms->runtime == MEMEST_RUNTIME_CPU ? "cpu" : "cuda");
    fputs("<text x=\"20\" y=\"48\" font-size=\"13\">", f);
    xml_text(f, buf);
    fputs("</text>\n", f);
    fprintf(f, "<text x=\"20\" y=\"68\" font-size=\"11\" fill=\"#555555\">live bytes by category after each "
               "allocation, free and op temporary (%d events); MiB = 2^20 bytes; the peak label gives %s</text>\n",
            n, ms->runtime == MEMEST_RUNTIME_CPU ? "bytes the CPU allocator hands out" : "torch.cuda.max_memory_allocated");

    /* phase bands, named above the plot where they are wide enough */
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && pts[j].phase == pts[i].phase) j++;
        int ph_i = (int)pts[i].phase >= 0 && pts[i].phase <= MEMEST_PHASE_OPTIMIZER ? (int)pts[i].phase : 0;
        double x0 = XE(i), x1 = XE(j);
        /* a phase of a few events among thousands (SGD's optimizer step)
         * would be a hairline: at least MIN_BAND px, taken from its left */
        if (x1 - x0 < MIN_BAND) {
            x0 = x1 - MIN_BAND;
            if (x0 < PL) { x0 = PL; x1 = PL + MIN_BAND; }
        }
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", x0, PT, x1 - x0, PB - PT, phase_fill[ph_i]);
        const char *name = me_phase_name((MemestPhase)ph_i);
        if (x1 - x0 >= text_w(name, 12) + 6)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#444444\">%s</text>\n", (x0 + x1) / 2, PT - 6, name);
        i = j;
    }

    /* grid and y ticks */
    for (double v = 0; v <= ymax + ystep * 1e-6; v += ystep) {
        double y = YM(v);
        tick_label(v, ystep, buf, sizeof(buf));
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#cccccc\" stroke-width=\"0.6\"/>\n", PL, y, PR, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", PL - 6, y + 4, buf);
    }
    fprintf(f, "<text x=\"24\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 24 %d)\">MiB</text>\n", (PT + PB) / 2, (PT + PB) / 2);

    /* stacked areas: each category from the running sum below it to the
     * running sum with it, as steps (memory holds between events), each
     * bucket spanning its events */
    for (int c = 0; c < MEMEST_MEM_COUNT; c++) {
        if (!used[c]) continue;
        fprintf(f, "<path fill=\"%s\" stroke=\"none\" d=\"", cat_color[c]);
        for (int b = 0; b < nb; b++) {
            const MemestSeriesPoint *p = &pts[pick[b]];
            uint64_t s = 0;
            for (int k = 0; k <= c; k++) s = me_sadd(s, p->live[k]);
            double y = YM(mib(s));
            fprintf(f, "%s%.1f %.1f L%.1f %.1f", b ? " L" : "M", XE(BLO(b)), y, XE(BLO(b + 1)), y);
        }
        for (int b = nb - 1; b >= 0; b--) {
            const MemestSeriesPoint *p = &pts[pick[b]];
            uint64_t s = 0;
            for (int k = 0; k < c; k++) s = me_sadd(s, p->live[k]);
            double y = YM(mib(s));
            fprintf(f, " L%.1f %.1f L%.1f %.1f", XE(BLO(b + 1)), y, XE(BLO(b)), y);
        }
        fputs(" Z\"/>\n", f);
    }

    /* axes and x ticks (event index) */
    fprintf(f, "<path d=\"M%d %d V%d H%d\" fill=\"none\" stroke=\"#333333\"/>\n", PL, PT, PB, PR);
    double xstep = nice_step((double)n, 8);
    if (xstep < 1) xstep = 1;
    for (double v = 0; v < n; v += xstep) {
        double x = XE(v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333333\"/>\n", x, PB, x, PB + 4);
        tick_label(v, 1, buf, sizeof(buf));
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, PB + 17, buf);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">event (op sequence of the step)</text>\n", (PL + PR) / 2, PB + 38);

    /* the peak: marker, then its label beside it on the side with room */
    int pb = 0;
    while (pb + 1 < nb && BLO(pb + 1) <= peak_i) pb++;
    double px = (XE(BLO(pb)) + XE(BLO(pb + 1))) / 2, py = YM(mib(peak_total));
    snprintf(buf, sizeof(buf), "peak %.2f MiB at %s (%s)", mib(mem->peak_allocated), mem->peak_name ? mem->peak_name : "?",
             me_phase_name(mem->peak_phase));
    double lw = text_w(buf, 12);
    bool right = px + 8 + lw <= PR;
    double lx = right ? px + 8 : px - 8, ly = py - 10;
    if (!right && lx - lw < PL) { right = true; lx = PL + 4; }
    if (ly - 12 < PT + 2) ly = py + 20;
    Box peak_box = { right ? lx : lx - lw, ly - 12, right ? lx + lw : lx, ly + 3 };
    fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#b00020\" stroke-width=\"0.8\" stroke-dasharray=\"2 3\"/>\n",
            px, PT, px, PB);

    /* capacity: a line on the scale, or a marker above it */
    if (gpu_bytes) {
        double gy = gpu_on_scale ? YM(mib(gpu_bytes)) : PT;
        char gib[32], gl[256];
        gib_text(gpu_bytes, gib, sizeof(gib));
        if (gpu_on_scale)
            snprintf(gl, sizeof(gl), "%s %s GiB", gpu_name && *gpu_name ? gpu_name : "GPU", gib);
        else
            snprintf(gl, sizeof(gl), "%s %s GiB: above this axis, %.1fx the peak \xe2\x86\x91", gpu_name && *gpu_name ? gpu_name : "GPU",
                     gib, (double)gpu_bytes / (double)(peak_total ? peak_total : 1));
        double gw = text_w(gl, 12);
        /* on the scale the label sits above its line; off it, under the
         * top edge (the phase names are above) */
        double gly = gpu_on_scale ? gy - 5 : PT + 15;
        Box left = { PL + 6, gly - 12, PL + 6 + gw, gly + 3 }, rightb = { PR - 6 - gw, gly - 12, PR - 6, gly + 3 };
        bool at_left = !overlaps(&left, &peak_box);
        if (!gpu_on_scale && !at_left && overlaps(&rightb, &peak_box)) { gly += 18; at_left = true; }
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#222222\" stroke-width=\"1.5\" stroke-dasharray=\"8 5\"/>\n",
                PL, gy, PR, gy);
        label(f, at_left ? PL + 6 : PR - 6, gly, at_left ? "start" : "end", "font-weight=\"bold\"", gl);
    }
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"#b00020\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>\n", px, py);
    label(f, lx, ly, right ? "start" : "end", "font-weight=\"bold\" fill=\"#b00020\"", buf);

    /* legend: the stack's order, top first, with each category at the peak */
    int y = PT + 4;
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">category</text>\n", LX, y);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-weight=\"bold\">MiB at peak</text>\n", W - 12, y);
    y += 8;
    for (int c = MEMEST_MEM_COUNT - 1; c >= 0; c--) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"%s/>\n", LX, y, cat_color[c],
                used[c] ? "" : " fill-opacity=\"0.35\"");
        fprintf(f, "<text x=\"%d\" y=\"%d\"%s>%s</text>\n", LX + 20, y + 11, used[c] ? "" : " fill=\"#999999\"",
                memest_mem_category_name((MemestMemCategory)c));
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\"%s>%.2f</text>\n", W - 12, y + 11, used[c] ? "" : " fill=\"#999999\"",
                mib(pts[peak_i].live[c]));
        y += 22;
    }
    y += 14;
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">phase</text>\n", LX, y);
    y += 8;
    for (int p = 0; p < 3; p++) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#bbbbbb\"/>\n", LX, y, phase_fill[p]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", LX + 20, y + 11, me_phase_name((MemestPhase)p));
        y += 22;
    }
    /* notes (folded BatchNorm, tied weights): what the curve cannot show,
     * one line each under the legend */
    const char *note;
    for (int i = 0; (note = memest_note_text(model, i, NULL)) && y + 16 < H; i++) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#a03000\">note: ", LX, y + 14);
        xml_text(f, note);
        fputs("</text>\n", f);
        y += 16;
    }
    fputs("</svg>\n", f);
#undef XE
#undef BLO
#undef YM
    me_free(pick);
    return ferror(f) ? ME_EIO : 0;
}

typedef struct PlotJob {
    const MemestAnalysis *a;
    uint64_t gpu_bytes;
    const char *gpu_name;
} PlotJob;

static int render_plot(const void *ctx, FILE *f)
{
    const PlotJob *j = ctx;
    return memest_plot_svg(j->a, f, j->gpu_bytes, j->gpu_name);
}

int memest_plot_svg_write(const MemestAnalysis *a, MemestWriteFn write, void *opaque, uint64_t gpu_bytes, const char *gpu_name)
{
    PlotJob j = { a, gpu_bytes, gpu_name };
    return me_render_to(write, opaque, render_plot, &j);
}

int memest_plot_svg_string(const MemestAnalysis *a, char **out, size_t *len, uint64_t gpu_bytes, const char *gpu_name)
{
    PlotJob j = { a, gpu_bytes, gpu_name };
    return me_render_string(out, len, render_plot, &j);
}
