#!/usr/bin/env python3
"""Issue 12, options: one rule for every option, and one table for --help,
the man page and README.

usage: test_issue12_cli12.py MEMEST SOURCE_ROOT CASE [MEMEST_1]

  batch_binding  item 6: --batch, --input, --dim that conflict or bind
                 nothing are errors naming both (the library's rule,
                 src/load/bind.c); agreeing ones are not
  option_rules   item 7: an option that needs another that is absent, or
                 conflicts with one given, or is given twice with two values,
                 is exit 2 naming both; with what it needs it runs
  options_doc    item 16: --help, memest.1 and README's option table list
                 the same options with the same placeholders
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402
from harness import check, failures, path, run  # noqa: E402
from test_cli import expect_bad  # noqa: E402

CASE = sys.argv[3]
MAN = sys.argv[4] if len(sys.argv) > 4 else None
TMP = tempfile.mkdtemp(prefix="memest-cli12-")
JSON_MODEL = path("models", "resnet18.json")  # inputs [batch, 3, 224, 224], symbolic dim 'batch'
ONNX_MODEL = path("models", "onnx", "resnet18_op17_eval.onnx")  # input 'input' [batch, 3, 224, 224]


def write(name, data):
    p = os.path.join(TMP, name)
    with open(p, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
    return p


def expect(args, code, words=(), label=None):
    expect_bad(args, words, code, label)


def batch_of(args):
    rc, out, err = run(*args, "--format", "json")
    check(rc == 0, f"[{' '.join(os.path.basename(a) for a in args)}] exit {rc}: {err.strip()}")
    return json.loads(out)["layers"][0]["input_shape"][0] if rc == 0 else None


def case_batch_binding():
    static = write("static.onnx", oc.conv_model(external=False, x_shape=(1, 3, 32, 32)))
    static4 = write("static4.onnx", oc.conv_model(external=False, x_shape=(4, 3, 32, 32)))
    # the examples: each was a silent answer on main
    expect([ONNX_MODEL, "--input", "1x3x224x224", "--batch", "4"], 2, ["--input '1x3x224x224'", "--batch 4"])
    expect([JSON_MODEL, "--dim", "nosuch=4"], 2, ["--dim 'nosuch=4'", "no symbolic dim 'nosuch'", "'batch'"])
    expect([ONNX_MODEL, "--dim", "nosuch=4"], 2, ["--dim 'nosuch=4'", "no symbolic dim 'nosuch'"])
    expect([JSON_MODEL, "--dim", "batch=4", "--batch", "2"], 2, ["--dim 'batch=4'", "--batch 2", "dim 'batch'"])
    expect([JSON_MODEL, "--dim", "batch=4", "--dim", "batch=8"], 2, ["--dim 'batch=4'", "--dim 'batch=8'"])
    expect([ONNX_MODEL, "--input", "3x224x224", "--batch", "2", "--dim", "batch=4"], 2, ["--dim 'batch=4'", "--batch 2"])
    # the same mechanism beyond the examples: a static batch with a sample
    # shape, a full shape on a static batch, the same input given twice,
    # and --max-batch, which re-binds the batch of a model that fixes it
    expect([static, "--input", "1x3x32x32", "--batch", "4"], 2, ["--batch 4", "--input '1x3x32x32'", "a batch (dim 0) of 1"])
    expect([ONNX_MODEL, "--input", "input=3x224x224", "--input", "input=3x200x200"], 2,
           ["--input 'input=3x224x224'", "--input 'input=3x200x200'"])
    expect([ONNX_MODEL, "--input", "1x3x224x224", "--train", "--gpu", "rtx3090", "--max-batch"], 2,
           ["--max-batch", "--input '1x3x224x224'"])
    # what agrees is no conflict, and a batch nobody gave follows the model
    check(batch_of([static, "--batch", "1"]) == 1, "--batch 1 on a model whose batch is 1")
    # a batch the export fixes is re-bound (issue 10, tests/test_issue10_bind.py)
    check(batch_of([static, "--batch", "8"]) == 8, "--batch 8 on a model whose batch is 1")
    check(batch_of([static, "--input", "3x32x32", "--batch", "4"]) == 4, "a sample shape and --batch 4 on a model whose batch is 1")
    check(batch_of([static4, "--input", "3x32x32"]) == 4, "a sample shape on a model whose batch is 4, no --batch")
    check(batch_of([static4]) == 4, "a model whose batch is 4, no --batch")
    check(batch_of([ONNX_MODEL, "--input", "8x3x224x224", "--batch", "8"]) == 8, "a full shape and --batch that agree")
    check(batch_of([ONNX_MODEL, "--input", "8x3x224x224"]) == 8, "a full shape, no --batch")
    check(batch_of([JSON_MODEL, "--dim", "batch=4", "--dim", "batch=4", "--batch", "4"]) == 4, "--dim and --batch that agree")
    check(batch_of([JSON_MODEL, "--dim", "batch=3"]) == 3, "--dim batch=3 alone")
    check(batch_of([ONNX_MODEL, "--input", "3x224x224", "--dim", "batch=3"]) == 3, "a sample shape and --dim batch=3, no --batch")
    check(batch_of([JSON_MODEL, "--batch", "5"]) == 5, "--batch 5 alone")


# item 7's examples, then every other pair the table holds: (option with a
# value, what it needs or conflicts with)
NEEDS = [
    (["--optimizer", "adam"], ["--train"]),
    (["--checkpoint", "4"], ["--train"]),
    (["--loss", "mse"], ["--train"]),
    (["--freeze", "layer1"], ["--train", "--grad"]),
    (["--input-grad"], ["--train", "--grad"]),
    (["--tolerance", "3"], ["--check"]),
    (["--shard", "zero3"], ["--gpus"]),
    (["--max-batch"], ["--gpu", "--gpu-mem", "--device-profile"]),
    (["--gpu-file", "GPUS"], ["--gpu", "--list-gpus"]),
]
CONFLICTS = [
    (["--train"], ["--grad"]),
    (["--amp", "fp16"], ["--dtype", "bf16"]),
    (["--gpu", "h100"], ["--device-profile", "PROFILE"]),
]


def case_option_rules():
    gpus = write("gpus.json", json.dumps([{"name": "lab", "memory_mib": 20000, "bandwidth_gbs": 900, "fp32_tflops": 20}]))
    prof = write("prof.json", json.dumps({
        "format": "memest-device-profile", "version": 1, "name": "lab-gpu", "memory_bytes": 16 << 30,
        "bandwidth_bytes_per_s": 5e11, "fp32_flops": 1e13, "fp16_flops": 5e13, "sms": 40,
        "cuda_context_bytes": 300 << 20, "allocation_granularity": 2 << 20, "cublas_workspace_bytes": 4 << 20,
        "measured": "test"}))
    golden = os.path.join(TMP, "golden.json")
    expect([JSON_MODEL, "--update-golden", golden], 0, label="write a golden")
    values = {"GPUS": gpus, "PROFILE": prof}
    with_value = {"--check": ["--check", golden], "--gpus": ["--gpus", "2"], "--gpu": ["--gpu", "rtx3090"], "--gpu-mem": ["--gpu-mem", "8GiB"], "--device-profile": ["--device-profile", prof]}

    def fill(args):
        return [values.get(a, a) for a in args]

    for opt, needed in NEEDS:
        opt = fill(opt)
        expect([JSON_MODEL, *opt], 2, [opt[0], *needed], label=f"{opt[0]} alone")
        for n in needed:
            other = with_value.get(n, [n])
            extra = ["--train"] if opt[0] == "--max-batch" else []
            expect([JSON_MODEL, *opt, *other, *extra], 0, label=f"{opt[0]} with {n}")
    for a, b in CONFLICTS:
        a, b = fill(a), fill(b)
        expect([JSON_MODEL, *a, *b], 2, [a[0], b[0]], label=f"{a[0]} with {b[0]}")
        expect([JSON_MODEL, *b, *a], 2, [a[0], b[0]], label=f"{b[0]} with {a[0]}")
    # the same rule for a value: without --train only ZeRO-3 shards
    # anything (the weights); --gpus alone was a note on main
    expect([JSON_MODEL, "--gpus", "4"], 2, ["--gpus '4'", "--train", "zero3"], label="--gpus in inference")
    expect([JSON_MODEL, "--gpus", "4", "--grad", "--shard", "zero1"], 2, ["--gpus '4'", "--shard zero1", "--train"],
           label="--gpus --shard zero1 under --grad")
    expect([JSON_MODEL, "--gpus", "4", "--shard", "zero3"], 0, label="--gpus --shard zero3 in inference")
    expect([JSON_MODEL, "--gpus", "4", "--train"], 0, label="--gpus --train")
    expect([JSON_MODEL, "--gpus", "1", "--shard", "zero3", "--train"], 2, ["--shard zero3", "--gpus '1'"], label="--shard on one GPU")
    # twice with two values is a conflict; the same twice is not; options
    # that add (--input, --dim, --freeze, --gpu-file) may repeat
    for opt, v1, v2 in (("--batch", "2", "4"), ("--format", "json", "csv"), ("--convention", "fvcore", "thop"),
                        ("--runtime", "cuda", "cpu"), ("-o", os.path.join(TMP, "a.txt"), os.path.join(TMP, "b.txt"))):
        expect([JSON_MODEL, opt, v1, opt, v2], 2, [opt, f"'{v1}'", f"'{v2}'"], label=f"{opt} twice")
    expect([JSON_MODEL, "--batch", "2", "--batch", "2"], 0, label="--batch 2 twice")
    expect([JSON_MODEL, "--train", "--freeze", "layer1", "--freeze", "layer2"], 0, label="--freeze twice")
    # --gpu-file is read before --gpu looks a name up or --list-gpus
    # lists, wherever it comes
    expect([JSON_MODEL, "--gpu", "lab", "--gpu-file", gpus], 0, label="--gpu before --gpu-file")
    rc, out, err = run("--list-gpus", "--gpu-file", gpus)
    check(rc == 0 and re.search(r"^lab ", out, re.M), f"--list-gpus --gpu-file: exit {rc}, 'lab' not listed: {out[-200:]}{err}")


def help_options(text):
    """(option, placeholder) of each row of --help: the first 32 columns."""
    rows = []
    for line in text.splitlines():
        if line.startswith("  -") and len(line) > 2:
            col = line[2:32].split()
            rows.append((col[0], col[1] if len(col) > 1 else None))
    return rows


def man_options(text):
    rows, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line == ".TP" and i + 1 < len(lines):
            tag = re.sub(r"\\f[BIRP]", "", lines[i + 1]).replace("\\-", "-").replace("\\e", "\\")
            parts = tag.split(" ", 1)
            rows.append((parts[0], parts[1] if len(parts) > 1 else None))
    return rows


def readme_options(text):
    """The options in README's table: each `-option ARG` in the first column."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("| option |"):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not line.startswith("|---"):
            first = re.split(r"(?<!\\)\|", line)[1]
            for code in re.findall(r"`([^`]+)`", first):
                code = code.replace("\\|", "|")
                if code.startswith("-"):
                    parts = code.split(" ", 1)
                    rows.append((parts[0], parts[1] if len(parts) > 1 else None))
    return rows


def readme_rows(text):
    """README's option table: each option's row text, by option."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `(-[a-z-]+)", line)
        if m:
            rows[m.group(1)] = line
    return rows


def man_rules(text):
    """(option, [options it needs], [options it conflicts with]) from memest.1."""
    out, cur = [], None
    plain = re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-")
    for line in plain.splitlines():
        if line.startswith("-") and cur is None:
            cur = (line.split(" ")[0], [], [])
            out.append(cur)
        elif line.startswith("Needs "):
            cur[1].extend(re.findall(r"(--[a-z-]+)", line))
        elif line.startswith("Not with "):
            cur[2].append(re.findall(r"(--[a-z-]+)", line)[0])
        if line == ".TP":
            cur = None
    return out


def case_options_doc():
    rc, help_text, err = run("--help")
    check(rc == 0, f"--help exit {rc}")
    rc, h_text, err = run("-h")
    check(rc == 0 and h_text == help_text, "-h is not --help")
    helped = help_options(help_text)
    check(len(helped) >= 30, f"--help lists {len(helped)} options")
    check(MAN is not None and os.path.isfile(MAN), f"no man page at {MAN}")
    manned = man_options(open(MAN).read()) if MAN and os.path.isfile(MAN) else []
    readme = readme_options(open(path("README.md")).read())
    for name, rows in (("memest.1", manned), ("README's option table", readme)):
        for opt in helped:
            check(opt in rows, f"{name} lacks {opt[0]} {opt[1] or ''} that --help has")
        for opt in rows:
            check(opt in helped, f"{name} has {opt[0]} {opt[1] or ''}, --help does not")
    check(len(set(helped)) == len(helped), "--help lists an option twice")
    # the rules the man page states from the table, README states too:
    # "needs `--x`" on the option's row, "not with `--y`" on either side's
    rows = readme_rows(open(path("README.md")).read())
    if MAN and os.path.isfile(MAN):
        for opt, needs, conflicts in man_rules(open(MAN).read()):
            row = rows.get(opt, "")
            for n in needs:
                check("needs" in row and f"`{n}`" in row, f"README's row of {opt} does not say it needs `{n}`: {row}")
            for c in conflicts:
                check(f"not with `{c}`" in row or f"not with `{opt}`" in rows.get(c, ""),
                      f"README's rows of {opt} and {c} do not say they conflict")
    # every option --help lists is one the command takes
    for opt, arg in helped:
        rc, out, err = run(JSON_MODEL, opt, *(["x"] if arg else []), "--format", "nosuch")
        check("unknown option" not in err, f"{opt}: --help lists it, the command does not take it")
    # meson installs the page
    meson = shutil.which("meson")
    if meson and MAN:
        p = subprocess.run([meson, "introspect", "--installed", os.path.dirname(os.path.abspath(MAN))], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        check(p.returncode == 0, f"meson introspect --installed: {p.stderr.strip()}")
        dests = json.loads(p.stdout).values() if p.returncode == 0 else []
        check(any(d.endswith(os.path.join("man1", "memest.1")) for d in dests), f"memest.1 is not installed: {list(dests)}")


CASES = {"batch_binding": case_batch_binding, "option_rules": case_option_rules, "options_doc": case_options_doc}

if __name__ == "__main__":
    CASES[CASE]()
    shutil.rmtree(TMP, ignore_errors=True)
    print(f"{CASE}: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
