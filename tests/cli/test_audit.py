"""lookalike audit (cli.audit): its exit statuses and what it prints."""

from __future__ import annotations

import subprocess
import sys
from tests.conftest import REPO
from tests.report.test_audit import _run_dir


def test_cli_exit_codes(tmp_path):
    run = _run_dir(tmp_path)
    ok = subprocess.run([sys.executable, "-m", "lookalike", "audit", str(run)], capture_output=True, text=True,
                        cwd=REPO, timeout=120)
    (run / "summary.html").unlink()
    bad = subprocess.run([sys.executable, "-m", "lookalike", "audit", str(run)], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    gone = subprocess.run([sys.executable, "-m", "lookalike", "audit", str(tmp_path / "nowhere")], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert (ok.returncode, bad.returncode, gone.returncode) == (0, 1, 2), (ok.stderr, bad.stdout, gone.stderr)
    assert "complete: summary.html: the page: missing" in bad.stdout
    assert "every invariant holds" in ok.stderr


def test_an_empty_folder_is_no_run_exit_2_not_a_violation(tmp_path, capsys):
    """`audit` on an empty folder exited 1 (two 'missing page' violations), as if a run had broken its invariants."""
    from lookalike.cli.audit import main

    assert main([str(tmp_path)]) == 2
    assert "holds no lookalike run" in capsys.readouterr().err
