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


def test_a_public_function_of_the_package_needs_a_docstring(tmp_path):
    """ruff's D1 rules hold on every module of the package (a public function, class, method or module
    without a docstring fails the lint) and on no test file."""
    import shutil as sh

    sh.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    body = '"""A module."""\n\n\ndef public(x):\n    return x\n'
    for where in ("lib/lookalike/plugin.py", "lib/lookalike/analysis/elsewhere.py", "tests/test_elsewhere.py"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(body)
    done = subprocess.run([*_ruff(), "check", "--output-format", "concise", "lib", "tests"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stdout
    assert "plugin.py:4:5: D103" in done.stdout and "elsewhere.py:4:5: D103" in done.stdout
    assert "test_elsewhere.py" not in done.stdout


def _mypy(*args: str) -> list[str]:
    """The mypy command with a cache of this test worker's own: two mypy processes writing one cache at
    once (the two pytest workers) ended in an INTERNAL ERROR on a fresh clone."""
    import os

    cache = REPO / ".mypy_cache" / f"tests-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    return [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args]


def test_mypy_passes_on_the_typed_surfaces():
    done = subprocess.run(_mypy("--no-error-summary"), cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_would_catch_a_wrong_type(tmp_path):
    (tmp_path / "bad.py").write_text("def f(n: int) -> str:\n    return n\n")
    done = subprocess.run(_mypy("--config-file", str(REPO / "pyproject.toml"), "--no-error-summary", str(tmp_path / "bad.py")),
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1 and "Incompatible return value type" in done.stdout


def test_mypy_sees_the_declared_parameters(tmp_path):
    """The configuration is declared types (lookalike.config), so a misspelt key or a value used as
    the wrong type in code that reads ctx.config is a type error before any run."""
    import os

    (tmp_path / "probe.py").write_text("from lookalike import params as P\n\ncfg = P.typed(P.check({}))\n"
                                       "n: int = cfg.encode.device\nx = cfg.encode.devise\n")
    done = subprocess.run(_mypy("--config-file", str(REPO / "pyproject.toml"), "--no-error-summary", str(tmp_path / "probe.py")),
                          cwd=REPO, capture_output=True, text=True, env=dict(os.environ, MYPYPATH=str(REPO / "lib")))
    assert done.returncode == 1, done.stdout + done.stderr
    assert '"EncodeParams" has no attribute "devise"' in done.stdout and "Incompatible types in assignment" in done.stdout


# The aliases kept where a module's own name is a variable in the file (params, questions, door, ...):
# each means one module everywhere. Any other import of a lookalike module is under its own name.
MODULE_ALIASES = {"AG": "lookalike.judging.agreement", "CL": "lookalike.report.claims",
                  "D": "lookalike.retrieval.derived", "E": "lookalike.retrieval.encoders",
                  "H": "lookalike.analysis.haystack", "IL": "lookalike.io.labels", "JD": "lookalike.judging.door",
                  "L": "lookalike.judging.store", "M": "lookalike.eval.metrics", "N": "lookalike.analysis.negatives",
                  "P": "lookalike.params", "Q": "lookalike.analysis.questions", "QC": "lookalike.analysis.cleaning",
                  "R": "lookalike.retrieval.rerank"}


def module_aliases(text: str) -> list[tuple[int, str, str]]:
    """(line, alias, module) for each module imported under a name other than its own that is not
    lowercase (ruff's N812): 'from lookalike.data import schema as C'."""
    import ast

    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for al in node.names:
                if al.asname and al.asname != al.asname.lower():
                    module = f"{node.module}.{al.name}" if isinstance(node, ast.ImportFrom) else al.name
                    out.append((node.lineno, al.asname, module))
    return out


def test_an_alias_means_one_module_everywhere():
    """One-letter aliases once meant different modules in different files (C was schema, calibration,
    cleaning or compare): a module is now imported under its own name, or under the one alias listed
    above where its name is a variable in that file."""
    found = []
    for folder in ("lib", "tests", "benchmarks", "examples"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for line, alias, module in module_aliases(path.read_text(encoding="utf-8")):
                if MODULE_ALIASES.get(alias) != module:
                    found.append(f"{path.relative_to(REPO)}:{line}: {module} as {alias}")
    assert found == [], "\n".join(found)


def test_the_alias_check_sees_one():
    assert module_aliases("from lookalike.data import schema as C\nimport numpy as np\n") == [
        (1, "C", "lookalike.data.schema")]
