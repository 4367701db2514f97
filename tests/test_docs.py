"""The README and docs/ as a guide: short, current and pointing only at things that exist.

Every lookalike.* module path, `lookalike <command>`, `make <target>`, repository path and relative
link named in README.md or docs/*.md must exist; none may point outside the repository; the README's
Python example runs; docs/parameters.md is what the schema generates."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lookalike import params

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMANDS = {"run", "check", "eval", "leak-check", "audit", "labels", "example", "--version"}
GENERATED = ("outputs/", "examples/generated/", "build/", ".venv")
ROOTS = ("lib/", "params/", "docs/", "tests/", "benchmarks/", "examples/", "notebooks/")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _exists_dotted(name: str) -> bool:
    """lookalike.a.b is a module, or an attribute of the module before it."""
    name = name.rstrip(".")
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except ModuleNotFoundError:
        pass
    mod, _, attr = name.rpartition(".")
    try:
        return hasattr(importlib.import_module(mod), attr)
    except ModuleNotFoundError:
        return False


def test_the_readme_is_a_guide_of_at_most_300_lines():
    lines = _text(REPO / "README.md").splitlines()
    assert len(lines) <= 300, len(lines)
    for heading in ("## Install and run", "## Read your first report", "## Evaluate your own corpus in five steps",
                    "## Python API", "## Command line", "## Extending", "## Troubleshooting",
                    "## What each package is for"):
        assert heading in lines, heading


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_document_points_outside_the_repository(doc):
    text = _text(doc)
    assert "../shared" not in text and "/work/" not in text
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if re.match(r"^[a-z]+://", target):
            assert not target.startswith(("http://", "https://")) or "github.com" not in target
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(REPO), f"{doc.name}: {target} leaves the repository"
        assert path.exists(), f"{doc.name}: {target} does not exist"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_module_command_and_path_named_exists(doc):
    # a recipe's blocks write what does not exist yet (tests/test_recipes.py writes and runs them)
    text = re.sub(r"```\w*\n# (?:file|append):.*?```", "", _text(doc), flags=re.S)
    missing = []
    for name in sorted(set(re.findall(r"\blookalike(?:\.[A-Za-z_][A-Za-z0-9_]*)+", text))):
        if not _exists_dotted(name):
            missing.append(name)
    code = "\n".join(re.findall(r"```[a-z]*\n(.*?)```", text, re.S) + re.findall(r"`([^`\n]+)`", text))
    for cmd in sorted(set(re.findall(r"(?:^|[\s;&|(])(?:\.venv/bin/)?lookalike ((?:--)?[a-z][a-z-]*)", code, re.M))):
        if cmd not in COMMANDS:
            missing.append(f"lookalike {cmd}")
    targets = set(re.findall(r"^([a-z][a-z-]*):", _text(REPO / "Makefile"), re.M))
    for target in sorted(set(re.findall(r"(?:^|[\s;&|(])make ([a-z][a-z-]*)", code, re.M))):
        if target not in targets:
            missing.append(f"make {target}")
    for path in sorted(set(re.findall(r"`([A-Za-z0-9_./-]+\.(?:py|yaml|md|csv|j2|txt|png|ipynb))`", text))
                       | set(re.findall(r"`((?:lib|params|docs|tests|benchmarks|examples|notebooks)/[A-Za-z0-9_./-]+)`",
                                        text))):
        if path.startswith(ROOTS) and not path.startswith(GENERATED) and "<" not in path \
                and not (REPO / path).exists():
            missing.append(path)
    assert not missing, f"{doc.name} names what does not exist: {missing}"


def test_the_checker_catches_a_module_that_does_not_exist():
    assert _exists_dotted("lookalike.eval.metrics") and _exists_dotted("lookalike.compare")
    assert not _exists_dotted("lookalike.encoders") and not _exists_dotted("lookalike.retrieve")


def test_the_parameter_reference_is_current():
    assert _text(REPO / "docs" / "parameters.md") == params.reference_markdown(), \
        "docs/parameters.md is stale: run make docs"


def test_base_yaml_is_written_from_the_declared_schema():
    """lookalike/config.py declares every key once; base.yaml (what a user reads, what an installed
    package ships) is written from it and reads back as the same defaults and constraints."""
    assert params.BASE_PARAMS.read_text(encoding="utf-8") == params.base_yaml(), "lib/lookalike/base.yaml is stale: run make docs"
    assert params.read_yaml(params.BASE_PARAMS) == params.defaults()
    import yaml

    for value in ["", "q{row:04d}", "lookalike report", "a: b", "#x", "true", "1", "4-20", " pad", "it's", "[x]"]:
        assert yaml.safe_load(f"k: {params._yaml_value(value)}  # c")["k"] == value, value
    assert yaml.safe_load(f"k: {params._yaml_value(['4-20', 'a, b', ''])}")["k"] == ["4-20", "a, b", ""]


def test_every_key_of_the_schema_is_in_the_reference():
    ref = _text(REPO / "docs" / "parameters.md")
    schema = params.read_yaml(params.BASE_PARAMS)
    keys = [f"{k}.{sub}" if isinstance(v, dict) and v else k for k, v in schema.items()
            for sub in (v if isinstance(v, dict) and v else [None])]
    assert len(keys) >= 90          # the schema has about a hundred keys: the walk found them
    for key in keys:
        assert f"| `{key}` |" in ref, key


def _python_blocks(section: str) -> list[str]:
    text = _text(REPO / "README.md")
    part = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", part, re.S)


def test_the_readme_python_example_runs(tmp_path):
    """The README's first API block, as written, on qrels and two runs written here."""
    (tmp_path / "qrels.txt").write_text("".join(f"q{q} 0 d{d} {int(d == q)}\n" for q in range(6) for d in range(6)))
    for name, good in (("bm25", 3), ("colpali", 5)):
        (tmp_path / f"{name}.run").write_text("".join(
            f"q{q} Q0 d{d} {r + 1} {10 - r} {name}\n"
            for q in range(6) for r, d in enumerate(sorted(range(6), key=lambda d: (d != q or q >= good, d)))))
    block = _python_blocks("Python API")[0]
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "win / tie / loss" in done.stdout and (tmp_path / "comparison.html").is_file()


@pytest.mark.slow
def test_the_readme_finished_run_example_runs(ci_run, tmp_path):
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "demo").symlink_to(ci_run)
    # the second block continues the first one's session: lookalike is imported there
    block = "import lookalike\n" + _python_blocks("Python API")[1] + "\nprint(report.n_queries, len(headline))\n"
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    n, rows = map(int, done.stdout.split())
    assert n > 0 and rows > 0
