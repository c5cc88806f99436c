"""The progress bar of a long study."""
from __future__ import annotations

import sys
import time


class _Progress:
    """A one-line progress bar on stderr, drawn only once the work has run for ``delay`` seconds."""

    def __init__(self, total, label, enabled="auto", delay=2.0, stream=None):
        self.stream = sys.stderr if stream is None else stream
        if enabled == "auto":
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled, self.total, self.label, self.delay = bool(enabled), max(int(total), 1), label, delay
        self.done, self.t0, self.last, self.drawn = 0, time.monotonic(), 0.0, False

    def update(self, n=1):
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.t0 < self.delay or (now - self.last < 0.1 and self.done < self.total):
            return
        self.last = now
        el = now - self.t0
        frac = self.done / self.total
        left = el / frac - el if frac > 0 else 0.0
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}  {el:5.1f}s elapsed, "
                          f"~{left:4.0f}s left ")
        self.stream.flush()
        self.drawn = True

    def close(self):
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
