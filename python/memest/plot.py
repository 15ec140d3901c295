"""The memory timeline drawn (matplotlib when present, else the library's
SVG) and the notebook view of a Report."""
import html
import os
import shutil
import subprocess

from . import _lib as L

COLORS = {"weights": "#4c72b0", "inputs": "#8c8c8c", "activations": "#55a868", "saved": "#c44e52",
          "gradients": "#8172b2", "activation_grads": "#ccb974", "optimizer": "#64b5cd",
          "temporary": "#e6a35c", "workspace": "#b0b0b0", "autocast_cache": "#da8bc3"}


class SVG:
    """SVG text that notebooks display (_repr_svg_)."""

    def __init__(self, text):
        self.data = text

    def _repr_svg_(self):
        return self.data

    def __str__(self):
        return self.data

    def save(self, path):
        save_svg(self.data, path)


def save_svg(text, path):
    """SVG to path; .png/.pdf through rsvg-convert (librsvg2-bin)."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".svg":
        with open(path, "w") as f:
            f.write(text)
        return
    tool = shutil.which("rsvg-convert")
    if ext not in (".png", ".pdf") or not tool:
        raise ValueError("plot(%r): without matplotlib the plot is SVG; save it as .svg, or install matplotlib "
                         "(python3-matplotlib) or rsvg-convert (librsvg2-bin) for .png/.pdf" % path)
    subprocess.run([tool, "-f", ext[1:], "-o", path], input=text.encode(), check=True)


def _matplotlib():
    try:
        import matplotlib
        if not os.environ.get("DISPLAY") and "ipykernel" not in __import__("sys").modules:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def plot(report, path=None, gpu=None):
    from .core import gpu as find_gpu
    g = find_gpu(gpu) if gpu is not None else report.gpu
    plt = _matplotlib()
    if plt is None:
        svg = SVG(report.svg(g))
        if path:
            svg.save(os.fspath(path))
        return svg
    pts = report.series()
    mem = report.memory
    if not pts or mem is None:
        raise ValueError("no memory timeline to plot (%s)" % ("an unknown op left memory out" if mem is None
                                                             else "the series was not recorded"))
    mib = 2.0 ** 20
    cats = [c for c in L.MEM_CATEGORIES if any(p[2][c] for p in pts)]
    xs = list(range(len(pts)))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.stackplot(xs, *[[p[2][c] / mib for p in pts] for c in cats], labels=cats,
                 colors=[COLORS[c] for c in cats], linewidth=0)
    start = 0
    for i in range(1, len(pts) + 1):  # phases shaded
        if i == len(pts) or pts[i][1] != pts[start][1]:
            if pts[start][1] != "forward":
                ax.axvspan(start, i - 1, color="#000000", alpha=0.05 if pts[start][1] == "backward" else 0.1, lw=0)
            start = i
    totals = [sum(p[2].values()) for p in pts]
    k = max(range(len(totals)), key=totals.__getitem__)
    ax.annotate("peak %.1f MiB at %s" % (totals[k] / mib, pts[k][0] or pts[k][1]), (k, totals[k] / mib),
                textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    if g is not None:
        ax.axhline(g.memory / mib, color="#d62728", ls="--", lw=1, label="%s capacity" % g.name)
    ax.set_xlabel("event (%s)" % mem.mode)
    ax.set_ylabel("live MiB")
    ax.set_title("%s: memory timeline%s" % (report.model.name, ", steady-state step" if len(mem.steps) > 1 else ""))
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    fig.tight_layout()
    if path:
        fig.savefig(os.fspath(path), dpi=120)
    return fig


def _num(v):
    return format(int(v), ",") if isinstance(v, (int, str)) and str(v).isdigit() else html.escape(str(v))


def html_report(report, max_rows=60):
    """Summary, memory at the peak, the timeline and the layers (the first
    and last rows of a long model), every name escaped."""
    d = report.to_dict()
    t = d["totals"]
    e = html.escape
    parts = ["<div class='memest-report'>",
             "<h4>memest: %s</h4>" % e(report.model.name),
             "<table><tr><th>params</th><th>%s</th><th>FLOPs</th><th>layers</th></tr>" %
             ("MAdd" if "madd" in t else "MACs"),
             "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr></table>" %
             (_num(t["params"]), _num(t.get("macs", t.get("madd", 0))), _num(t["flops"]), _num(t["nodes"]))]
    mem = report.memory
    if mem is not None:
        s = mem.steps[-1]
        parts.append("<p>peak (%s, %s runtime): <b>%.2f MiB</b> at %s (%s)</p>" %
                     (e(mem.mode), e(d["memory"]["runtime"]), mem.peak / 2**20, e(s.peak_at), e(s.peak_phase)))
        parts.append("<table><tr><th>at the peak</th><th>MiB</th></tr>" + "".join(
            "<tr><td>%s</td><td>%.2f</td></tr>" % (e(c), b / 2**20) for c, b in s.at_peak.items() if b) + "</table>")
        try:
            parts.append(report.svg())
        except Exception as ex:  # noqa: BLE001 - the rest of the view still helps
            parts.append("<p>(no plot: %s)</p>" % e(str(ex)))
    rows = d["layers"]
    shown = rows if len(rows) <= max_rows else rows[:max_rows // 2] + [None] + rows[-max_rows // 2:]
    cols = ("name", "op", "input_shape", "output_shape", "params", "macs", "flops")
    parts.append("<table><tr>" + "".join("<th>%s</th>" % c for c in cols) + "</tr>")
    for r in shown:
        if r is None:
            parts.append("<tr><td colspan='%d'>... %d rows ...</td></tr>" % (len(cols), len(rows) - max_rows))
            continue
        cells = []
        for c in cols:
            v = r.get(c, r.get("madd", "") if c == "macs" else "")
            cells.append("<td>%s</td>" % ("x".join(map(str, v)) if isinstance(v, list) else _num(v)))
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table></div>")
    return "\n".join(parts)

