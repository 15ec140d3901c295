#!/usr/bin/env python3
"""Issue 12, options: one rule for every option.

usage: test_issue12_cli12.py MEMEST SOURCE_ROOT CASE

  batch_binding  item 6: --batch, --input, --dim that conflict or bind
                 nothing are errors naming both (the library's rule,
                 src/load/bind.c); agreeing ones are not
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402
from harness import check, failures, path, run  # noqa: E402
from test_cli import expect_bad  # noqa: E402

CASE = sys.argv[3]
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
    expect([static, "--batch", "8"], 2, ["static.onnx", "--batch 8", "input 'x'", "dim 0 is 1 in the model"])
    expect([ONNX_MODEL, "--input", "1x3x224x224", "--batch", "4"], 2, ["--input '1x3x224x224'", "--batch 4"])
    expect([JSON_MODEL, "--dim", "nosuch=4"], 2, ["--dim 'nosuch=4'", "no symbolic dim 'nosuch'", "'batch'"])
    expect([ONNX_MODEL, "--dim", "nosuch=4"], 2, ["--dim 'nosuch=4'", "no symbolic dim 'nosuch'"])
    expect([JSON_MODEL, "--dim", "batch=4", "--batch", "2"], 2, ["--dim 'batch=4'", "--batch 2", "dim 'batch'"])
    expect([JSON_MODEL, "--dim", "batch=4", "--dim", "batch=8"], 2, ["--dim 'batch=4'", "--dim 'batch=8'"])
    expect([ONNX_MODEL, "--input", "3x224x224", "--batch", "2", "--dim", "batch=4"], 2, ["--dim 'batch=4'", "--batch 2"])
    # the same mechanism beyond the examples: a static batch with a sample
    # shape, a full shape on a static batch, the same input given twice,
    # and --max-batch, which re-binds the batch of a model that fixes it
    expect([static, "--input", "3x32x32", "--batch", "4"], 2, ["--batch 4", "--input '3x32x32'", "dim 0 is 1 in the model"])
    expect([static, "--input", "1x3x32x32", "--batch", "4"], 2, ["--batch 4", "dim 0 is 1 in the model"])
    expect([ONNX_MODEL, "--input", "input=3x224x224", "--input", "input=3x200x200"], 2,
           ["--input 'input=3x224x224'", "--input 'input=3x200x200'"])
    expect([static, "--train", "--gpu", "rtx3090", "--max-batch"], 2, ["--max-batch", "dim 0 is 1 in the model"])
    expect([ONNX_MODEL, "--input", "1x3x224x224", "--train", "--gpu", "rtx3090", "--max-batch"], 2,
           ["--max-batch", "--input '1x3x224x224'"])
    # what agrees is no conflict, and a batch nobody gave follows the model
    check(batch_of([static, "--batch", "1"]) == 1, "--batch 1 on a model whose batch is 1")
    check(batch_of([static4, "--input", "3x32x32"]) == 4, "a sample shape on a model whose batch is 4, no --batch")
    check(batch_of([static4]) == 4, "a model whose batch is 4, no --batch")
    check(batch_of([ONNX_MODEL, "--input", "8x3x224x224", "--batch", "8"]) == 8, "a full shape and --batch that agree")
    check(batch_of([ONNX_MODEL, "--input", "8x3x224x224"]) == 8, "a full shape, no --batch")
    check(batch_of([JSON_MODEL, "--dim", "batch=4", "--dim", "batch=4", "--batch", "4"]) == 4, "--dim and --batch that agree")
    check(batch_of([JSON_MODEL, "--dim", "batch=3"]) == 3, "--dim batch=3 alone")
    check(batch_of([ONNX_MODEL, "--input", "3x224x224", "--dim", "batch=3"]) == 3, "a sample shape and --dim batch=3, no --batch")
    check(batch_of([JSON_MODEL, "--batch", "5"]) == 5, "--batch 5 alone")


CASES = {"batch_binding": case_batch_binding}

if __name__ == "__main__":
    CASES[CASE]()
    shutil.rmtree(TMP, ignore_errors=True)
    print(f"{CASE}: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
