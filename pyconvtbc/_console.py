"""What the commands print while the user waits: progress on stderr, and a quiet end when stdout's reader goes.

``Progress`` is the progress of every command that can run for more than a couple of seconds (``python -m
pyconvtbc study train``, ``bench/run.py``).  Its ``mode`` is the command's ``--progress`` / ``--no-progress``:

* ``"auto"`` (no option): a one-line bar redrawn in place when stderr is a terminal, nothing when it is not (a
  log file or a pipe stays clean);
* ``True`` (``--progress``): the bar on a terminal, else plain lines (one per tenth of the work, and at least
  every ``LINE_EVERY_S`` seconds), fit for a log;
* ``False`` (``--no-progress``): nothing.

``quiet_broken_pipe(main)`` runs a command's main function; when the reader of stdout has gone (``... | head
-3``) the command ends at once, without a traceback, with status 141 (128 + SIGPIPE, as a Unix tool killed by
the signal reports).
"""
import os
import sys
import time
from typing import Callable, Optional, TextIO, Union

ProgressMode = Union[bool, str]      # True, False or "auto"
LINE_EVERY_S = 10.0                  # plain lines: at least this often while the work runs
BROKEN_PIPE_STATUS = 141


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # a closed or a fake stream
        return False


class Progress:
    """Progress of ``total`` steps of work named ``label``, on ``stream`` (default stderr); see the module."""

    def __init__(self, total: int, label: str, mode: ProgressMode = "auto", stream: Optional[TextIO] = None,
                 bar_width: int = 30) -> None:
        if mode not in (True, False, "auto"):
            raise ValueError(f"mode is {mode!r}; expected True, False or 'auto'")
        self.stream = sys.stderr if stream is None else stream
        tty = _is_tty(self.stream)
        self.style = ("bar" if tty else "lines") if mode is True else ("bar" if mode == "auto" and tty else None)
        self.total, self.label, self.bar_width = max(int(total), 1), label, bar_width
        self.done = 0
        self.t0 = time.monotonic()
        self.last_draw = self.t0
        self.last_tenth = 0
        self.drawn = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _times(self) -> str:
        el = time.monotonic() - self.t0
        frac = self.done / self.total
        left = f", ~{el / frac - el:.0f} s left" if 0 < frac < 1 else ""
        return f"{el:.0f} s elapsed{left}"

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):  # stderr gone: the work goes on without progress
            self.style = None

    def update(self, n: int = 1, note: str = "") -> None:
        """Count ``n`` more steps done; ``note`` (e.g. the mode being run) is shown beside the count."""
        self.done = min(self.done + n, self.total)
        if self.style is None:
            return
        now = time.monotonic()
        tenth = 10 * self.done // self.total
        if self.style == "bar":
            if now - self.last_draw < 0.1 and self.done < self.total:
                return
            full = self.bar_width * self.done // self.total
            bar = "#" * full + "." * (self.bar_width - full)
            text = f"\r{self.label} [{bar}] {self.done}/{self.total} {self._times()}{'  ' + note if note else ''}"
            self._write(text + "\033[K")        # erase what a longer previous line left
        else:
            if tenth == self.last_tenth and now - self.last_draw < LINE_EVERY_S and self.done < self.total:
                return
            self._write(f"{self.label}: {self.done}/{self.total} ({100 * self.done // self.total}%), "
                        f"{self._times()}{'; ' + note if note else ''}\n")
        self.last_draw, self.last_tenth, self.drawn = now, tenth, True

    def close(self) -> None:
        """End the bar's line (the plain lines need nothing)."""
        if self.drawn and self.style == "bar":
            self._write("\n")
        self.style = None


def quiet_broken_pipe(main: Callable[[], int]) -> int:
    """``main()``'s status; if stdout's reader has gone, BROKEN_PIPE_STATUS with no traceback (stdout is pointed
    at /dev/null so that the interpreter's own flush at exit cannot fail again)."""
    try:
        rc = main()
        sys.stdout.flush()          # what is still buffered fails here, inside the guard
        return rc
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return BROKEN_PIPE_STATUS
