"""A one-line progress indication on stderr for the long parts (export,
max-batch sweeps): shown on a terminal, quiet otherwise."""
import sys
import time


class Progress:
    def __init__(self, enabled=None, stream=None):
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.enabled = bool(enabled)
        self.shown = 0
        self.last = 0.0

    def say(self, text, force=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.1:  # a redraw per op would cost more than the op
            return
        self.last = now
        line = "memest: " + text
        self.stream.write("\r" + line.ljust(self.shown))
        self.stream.flush()
        self.shown = len(line)

    def done(self):
        if self.enabled and self.shown:
            self.stream.write("\r" + " " * self.shown + "\r")
            self.stream.flush()
            self.shown = 0
