"""Progress bars for long passes (OCR, encoding, judging): rate and ETA on the terminal, never in
a stored notebook.

A stage runs inside a Jupyter kernel, whose stdout and stderr become notebook outputs, so a bar
there would land in the stored notebook (with timings that change every run). Instead the runner
opens a side channel: it names a file in LOOKALIKE_PROGRESS, every bar a stage draws is written to
that file, and a thread of the runner copies what arrives to the runner's own stderr — the
terminal. Outside the runner (a script, a REPL) a bar goes to stderr when stderr is a terminal.
Passes over fewer than MIN_TOTAL items draw no bar.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO
from collections.abc import Iterable, Iterator

CHANNEL = "LOOKALIKE_PROGRESS"
MIN_TOTAL = 200


def _sink() -> TextIO | None:
    path = os.environ.get(CHANNEL, "")
    if path:
        try:
            return open(path, "a", encoding="utf-8", buffering=1)
        except OSError:
            return None
    stream = sys.__stderr__
    return stream if stream is not None and stream.isatty() else None


def bar(iterable: Iterable, total: int | None = None, desc: str = "", min_total: int = MIN_TOTAL,
        unit: str = "it") -> Iterable:
    """iterable, wrapped in a tqdm bar on the terminal when it has at least min_total items and
    there is a terminal to draw on (the runner's channel, or an interactive stderr); else as it is."""
    total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
    if total is None or total < min_total:
        return iterable
    sink = _sink()
    if sink is None:
        return iterable
    from tqdm import tqdm

    # explicit disable=False: the runner sets TQDM_DISABLE for every other library's bars in a kernel
    return _closing(tqdm(iterable, total=total, desc=desc, unit=unit, file=sink, mininterval=1.0, ncols=100,
                         disable=False, dynamic_ncols=False), sink)


def _closing(bar_, sink) -> Iterator:
    try:
        yield from bar_
    finally:
        bar_.close()
        if sink is not sys.__stderr__:
            sink.close()


@contextmanager
def relay(to: TextIO | None = None, poll: float = 0.25):
    """The runner's side of the channel: set LOOKALIKE_PROGRESS to a fresh file for the duration
    and copy whatever bars write there to `to` (stderr) as it arrives."""
    import tempfile

    to = to or sys.stderr
    fd, name = tempfile.mkstemp(prefix="lookalike-progress-", suffix=".txt")
    os.close(fd)
    previous = os.environ.get(CHANNEL)
    os.environ[CHANNEL] = name
    stop = threading.Event()

    def pump():
        with open(name, encoding="utf-8", errors="replace") as fh:
            while True:
                chunk = fh.read()
                if chunk:
                    to.write(chunk)
                    to.flush()
                elif stop.is_set():
                    return
                else:
                    time.sleep(poll)

    thread = threading.Thread(target=pump, name="lookalike-progress", daemon=True)
    thread.start()
    try:
        yield Path(name)
    finally:
        stop.set()
        thread.join(timeout=5)
        if previous is None:
            os.environ.pop(CHANNEL, None)
        else:
            os.environ[CHANNEL] = previous
        Path(name).unlink(missing_ok=True)
