#!/usr/bin/env python3
"""Issue 14, helper st: parameter counts and safetensors headers through the
memest command.

usage: test_issue14_st.py MEMEST SOURCE_ROOT CASE
  params  each models/llm/<name>/config.json: totals.params equal to
          golden/truth/llm/params.json (the family built on the meta
          device, equal to the published counts); a family memest does not
          build yet must exit 2 naming model_type
  folder  a model folder (config.json + headers-only safetensors made by
          tests/llm/craft_headers.py): params and weight bytes as the
          headers say; a config of another model, or a hostile shard,
          exits 2 naming the file
Exits 77 (skipped) when this memest has no language-model path (--seq)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import MEMEST, ROOT, check, failures, path, run  # noqa: E402

CASE = sys.argv[3]


def totals(target):
    rc, out, err = run(target, "--seq", "8", "--format", "json")
    if rc != 0:
        return rc, None, err
    return rc, json.loads(out)["totals"], err


def case_params():
    truth = json.load(open(path("golden", "truth", "llm", "params.json")))["models"]
    matched = 0
    for name, t in sorted(truth.items()):
        rc, tot, err = totals(path(t["config"]))
        if rc == 0:
            check(tot["params"] == t["params"], f"[{name}] params {tot['params']:,}, meta device {t['params']:,}")
            matched += tot["params"] == t["params"]
        else:
            check(rc == 2 and "model_type" in err, f"[{name}] exit {rc} without naming model_type: {err.strip()}")
    check(matched >= 6, f"only {matched} families counted")  # llama x2, mistral, qwen2, gemma x2 at least


def case_folder():
    tmp = tempfile.mkdtemp(prefix="memest-i14-st-")
    try:
        subprocess.run([sys.executable, path("tests", "llm", "craft_headers.py"), tmp], check=True)
        man = json.load(open(os.path.join(tmp, "manifest.json")))
        good = os.path.join(tmp, "llama3-8b-bf16")
        shutil.copy(path("models", "llm", "llama-3-8b", "config.json"), good)
        rc, tot, err = totals(good)
        check(rc == 0, f"[folder] exit {rc}: {err.strip()}")
        if rc == 0:
            want = man["llama3-8b-bf16"]
            check(tot["params"] == want["params"], f"[folder] params {tot['params']:,}, headers {want['params']:,}")
            check(tot["param_bytes"] == want["bytes"], f"[folder] weight bytes {tot['param_bytes']:,}, headers {want['bytes']:,}")
        # Llama-2-7B's config beside Llama-3-8B's weights
        shutil.copy(path("models", "llm", "llama-2-7b", "config.json"), os.path.join(good, "config.json"))
        rc, _, err = run(good, "--seq", "8")
        check(rc == 2 and "config.json" in err and "6738415616" in err and "8030261248" in err,
              f"[folder, wrong config] exit {rc}: {err.strip()}")
        # a hostile shard in a folder
        bad = os.path.join(tmp, "hostile")
        os.mkdir(bad)
        shutil.copy(path("models", "llm", "llama-3-8b", "config.json"), bad)
        shutil.copy(os.path.join(tmp, "overlap.safetensors"), os.path.join(bad, "model.safetensors"))
        rc, _, err = run(bad, "--seq", "8")
        check(rc == 2 and "model.safetensors" in err and "'b'" in err and "overlaps" in err,
              f"[folder, hostile shard] exit {rc}: {err.strip()}")
        check("runtime error" not in err and "AddressSanitizer" not in err, f"sanitizer: {err[-300:]}")
    finally:
        shutil.rmtree(tmp)


if "--seq" not in run("--help")[1]:
    print("SKIP: this memest has no language-model path (--seq)")
    sys.exit(77)
{"params": case_params, "folder": case_folder}[CASE]()
sys.exit(1 if failures else 0)
