"""The loss a truth file names (tests/oracle/measure_memory.py LOSS_TEXT,
tests/measure/pytorch_cuda.py's per-cell loss) as memest's --loss: the
oracle's out.float().pow(2).mean() is pow2-mean, every F.cross_entropy
form (classes, tokens, segmentation maps) is cross-entropy. Another text
is an error, not a guess."""


def memest_loss(text):
    text = text or ""
    if "pow(2).mean()" in text:
        return "pow2-mean"
    if "cross_entropy" in text:
        return "cross-entropy"
    raise ValueError("a truth loss memest has no --loss for: %r" % text)
