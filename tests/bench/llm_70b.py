#!/usr/bin/env python3
"""Issue 14 item 5: how long memest takes on a config-derived 70B model
(Llama-3-70B's config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads,
bf16), prefill of 4096 tokens on an H100 and the last of 256 decode steps.
Prints the median wall time of 5 runs of the whole command (process start,
read, build, shapes, costs, timeline, report to /dev/null) and the median
CPU time (user + system) the command used: on a shared machine the wall
time also counts the waits for a core.

usage: python3 tests/bench/llm_70b.py [build/memest]"""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

MEMEST = sys.argv[1] if len(sys.argv) > 1 else "build/memest"
CFG = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 8192, "num_hidden_layers": 80,
       "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
       "rope_theta": 500000.0, "torch_dtype": "bfloat16"}

with tempfile.TemporaryDirectory() as d:
    p = os.path.join(d, "config.json")
    with open(p, "w") as f:
        json.dump(CFG, f)
    for extra in ([], ["--new-tokens", "256"]):
        args = [MEMEST, p, "--seq", "4096", "--gpu", "h100-sxm", *extra]
        times, cpu = [], []
        for _ in range(5):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(args, stdout=subprocess.DEVNULL, check=True)
            times.append(time.perf_counter() - t)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        print(f"{' '.join(args[2:])}: wall median {1000 * statistics.median(times):.1f} ms "
              f"(min {1000 * min(times):.1f}), CPU median {1000 * statistics.median(cpu):.1f} ms (5 runs)")
