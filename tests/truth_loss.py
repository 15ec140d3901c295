"""The loss a truth file names (tests/oracle/measure_memory.py LOSS_TEXT,
tests/measure/pytorch_cuda.py's per-cell loss) as memest's --loss: the
oracle's out.float().pow(2).mean() is pow2-mean, every F.cross_entropy
form (classes, tokens, segmentation maps) is cross-entropy. Another text
is an error, not a guess. Also the CPU a truth file was measured on, as
memest's options."""


def memest_loss(text):
    text = text or ""
    if "pow(2).mean()" in text:
        return "pow2-mean"
    if "cross_entropy" in text:
        return "cross-entropy"
    raise ValueError("a truth loss memest has no --loss for: %r" % text)


def memest_cpu_isa(truth):
    """--cpu-isa for the CPU the truth was measured on (tests/oracle's
    cpu_isa; avx512, memest's default, before the oracle recorded it)."""
    isa = truth.get("cpu_isa", "avx512")
    return [] if isa == "avx512" else ["--cpu-isa", isa]
