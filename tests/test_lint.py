"""The linter (ruff, rules and the reason for each exception in pyproject.toml) passes on the package,
the tests, the benchmarks and the examples, and the type checker (mypy) on the typed surfaces
pyproject.toml names: part of the fast lane."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "ruff"]


def test_ruff_passes():
    done = subprocess.run([*_ruff(), "check", "--output-format", "concise", "lib", "tests", "benchmarks", "examples"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_would_catch_an_unused_import(tmp_path):
    (tmp_path / "bad.py").write_text("import os\n")
    done = subprocess.run([*_ruff(), "check", "--config", str(REPO / "pyproject.toml"), str(tmp_path / "bad.py")],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1 and "F401" in done.stdout


def test_mypy_passes_on_the_typed_surfaces():
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=REPO, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_would_catch_a_wrong_type(tmp_path):
    (tmp_path / "bad.py").write_text("def f(n: int) -> str:\n    return n\n")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                           "--no-error-summary", str(tmp_path / "bad.py")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1 and "Incompatible return value type" in done.stdout


def test_mypy_sees_the_declared_parameters(tmp_path):
    """The configuration is declared types (lookalike.config), so a misspelt key or a value used as
    the wrong type in code that reads ctx.config is a type error before any run."""
    import os

    (tmp_path / "probe.py").write_text("from lookalike import params as P\n\ncfg = P.typed(P.check({}))\n"
                                       "n: int = cfg.encode.device\nx = cfg.encode.devise\n")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                           "--no-error-summary", str(tmp_path / "probe.py")], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, MYPYPATH=str(REPO / "lib")))
    assert done.returncode == 1, done.stdout + done.stderr
    assert '"EncodeParams" has no attribute "devise"' in done.stdout and "Incompatible types in assignment" in done.stdout
