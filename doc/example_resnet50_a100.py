#!/usr/bin/python3
# %% [markdown]
# # ResNet-50 training on an A100, from Python
#
# A notebook-style walk-through (each `# %%` is a cell; run it as a script
# too: `python3 doc/example_resnet50_a100.py`). It needs the C build
# (`meson setup build && meson compile -C build`), the package
# (`python3 -m pip install --break-system-packages --no-build-isolation ./python`,
# or `PYTHONPATH=python`) and Debian's python3-torch and python3-torchvision.
# Nothing runs on a GPU: memest predicts from the model's graph.

# %%
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))  # a checkout, uninstalled
import memest
import torchvision

model = torchvision.models.resnet50(weights=None)

# %% [markdown]
# ## The table
#
# One training step (forward, cross-entropy loss, backward, Adam) at batch
# 64 on an A100 80 GB. The module is exported to ONNX in memory (training
# mode, no constant folding, a dynamic batch) and analyzed by libmemest.
# `print(report)` is the memest command's table and memory summary; in a
# notebook the report displays itself as HTML (`_repr_html_`).

# %%
report = memest.estimate(model, input_size=(3, 224, 224), batch=64, mode="train", optimizer="adam",
                         gpu="a100-80gb")
print(report)
assert report.params == sum(p.numel() for p in model.parameters())

# %% [markdown]
# ## What is alive at the peak
#
# Training simulates two steps: step 1 creates Adam's state, step 2 is the
# steady state. `report.memory.at_peak` breaks the steady state's peak down
# by category.

# %%
mem = report.memory
for i, step in enumerate(mem.steps, 1):
    print("step %d: peak %.0f MiB at %s (%s), reserved %.0f MiB, nvidia-smi %.0f MiB"
          % (i, step.peak / 2**20, step.peak_at, step.peak_phase, step.peak_reserved / 2**20,
             step.nvidia_smi / 2**20))
for category, size in sorted(mem.at_peak.items(), key=lambda kv: -kv[1]):
    if size:
        print("  %-16s %9.1f MiB  %5.1f %%" % (category, size / 2**20, 100.0 * size / mem.steps[-1].peak_requested))

# %% [markdown]
# ## The largest batch that fits
#
# Solved by re-binding the same model to other batches (no re-export):
# memory is close to linear in the batch, and the answer is confirmed with
# full timelines at the batch and the next one.

# %%
mb = report.max_batch()
print("largest batch on %s: %d (needs %.1f GiB; %d would need %.1f GiB)"
      % (mb.gpu.name, mb.batch, mb.needed / 2**30, mb.batch + 1, mb.needed_next / 2**30))
frozen = memest.estimate(model, input_size=(3, 224, 224), batch=64, mode="train", optimizer="adam",
                         gpu="a100-80gb", freeze=["conv1", "bn1", "layer1", "layer2"])
print("with conv1..layer2 frozen: %d" % frozen.max_batch().batch)

# %% [markdown]
# ## The timeline, saved as PNG
#
# With matplotlib the plot is a Figure; without it, the library's SVG
# (converted with rsvg-convert from librsvg2-bin for a .png).

# %%
out = os.environ.get("MEMEST_EXAMPLE_PNG", "resnet50_a100_timeline.png")
report.plot(out)
print("wrote", out)
