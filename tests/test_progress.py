"""Progress bars: on the terminal through the runner's channel, never on a kernel's own streams."""

import io
import os
import subprocess
import sys

import pytest

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


@pytest.mark.slow
def test_stage_02_through_the_cli_shows_the_ocr_bar_on_stderr_and_not_in_the_notebook(tmp_path):
    # a small PDF corpus without a text layer (the documents example): stage 02 OCRs its pages with a cold
    # cache, under the runner's TQDM_DISABLE; the bar must reach the terminal (the runner's stderr)
    import json

    from lookalike.cli import main as cli_main
    from lookalike.retrieval.encoders import ocr

    if not ocr.tesseract_available():
        pytest.skip("tesseract is not installed (make setup installs it)")
    assert cli_main(["example", "documents", str(tmp_path / "docs")]) == 0
    params = tmp_path / "p.yaml"
    params.write_text("run: bars\ncorpus:\n  source: pdf\n"
                      f"  root: {tmp_path / 'docs' / 'pdfs'}\n  manifest: {tmp_path / 'docs' / 'meta.csv'}\n"
                      f"  questions: {tmp_path / 'docs' / 'questions.jsonl'}\n  qrels: {tmp_path / 'docs' / 'qrels.txt'}\n"
                      f"  dpi: 60\nencode:\n  encoders: [ocr-bm25]\n  cache_dir: {tmp_path / 'cache'}\n")
    env = {k: v for k, v in os.environ.items() if k not in (progress.CHANNEL, "TQDM_DISABLE")}
    done = subprocess.run([sys.executable, "-m", "lookalike", "run", str(params), "--out", str(tmp_path / "out"),
                           "--stage", "01_stratify_corpus", "--stage", "02_encode"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OCR" in done.stderr and "page/s" in done.stderr, done.stderr[-3000:]
    notebook = json.loads((tmp_path / "out" / "bars" / "notebooks" / "02_encode.ipynb").read_text())
    assert "page/s" not in json.dumps(notebook)
