"""Progress bars: on the terminal through the runner's channel, never on a kernel's own streams."""

import io
import os
import subprocess
import sys

from lookalike import progress


def test_short_passes_and_passes_without_a_terminal_draw_no_bar(monkeypatch):
    monkeypatch.delenv(progress.CHANNEL, raising=False)
    items = list(range(500))
    assert progress.bar(items, desc="x", min_total=10) is items             # pytest's stderr is not a terminal
    monkeypatch.setenv(progress.CHANNEL, os.devnull)
    assert progress.bar(items[:5], desc="x") == items[:5]                  # fewer than MIN_TOTAL items


def test_a_bar_drawn_in_another_process_reaches_the_runners_stderr():
    # a stage's kernel is another process: what it draws goes through the channel, not its own stderr
    to = io.StringIO()
    code = ("from lookalike import progress; import sys; "
            "n = sum(1 for _ in progress.bar(range(300), desc='OCR', unit='page')); print(n)")
    with progress.relay(to=to, poll=0.05) as channel:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(),
                              check=True)
        assert channel.is_file()
    assert done.stdout.strip() == "300" and done.stderr == ""               # nothing on the process's own streams
    drawn = to.getvalue()
    assert "OCR" in drawn and "300/300" in drawn and "page/s" in drawn
    assert progress.CHANNEL not in os.environ and not channel.exists()      # the channel is closed afterwards
