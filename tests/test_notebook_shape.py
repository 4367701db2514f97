"""Notebooks are reports: purpose, parameters, one stage call, then showing what it returned.

No def, class or loop in any notebook; at most 60 code lines each (the logic lives in
lookalike.stages and below, where it is unit-tested)."""

from __future__ import annotations

import ast

import nbformat
import pytest

from tests.conftest import REPO
from lookalike import stages


def _code(stage: str) -> str:
    nb = nbformat.read(REPO / "notebooks" / f"{stage}.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def offences(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            found.append(f"{type(node).__name__} on line {node.lineno}")
        if isinstance(node, (ast.For, ast.While, ast.comprehension)):
            found.append(f"loop on line {getattr(node, 'lineno', getattr(node.target, 'lineno', 0))}")
    return found


@pytest.mark.parametrize("stage", list(stages.STAGES))
def test_notebook_holds_no_logic(stage):
    assert offences(_code(stage)) == []


@pytest.mark.parametrize("stage", list(stages.STAGES))
def test_notebook_has_at_most_60_code_lines_and_one_stage_call(stage):
    code = _code(stage)
    assert sum(1 for line in code.splitlines() if line.strip()) <= 60
    assert code.count(f"{stages.STAGES[stage]}.run(") == 1


def test_the_checker_catches_a_loop_and_a_def():
    assert offences("for s in systems:\n    print(s)\n") == ["loop on line 1"]
    assert offences("def f():\n    return 1\n") == ["FunctionDef on line 1"]


def test_stored_notebooks_name_no_folder_of_this_machine():
    """A stored notebook re-run from another checkout must not change: no output may print an
    install path (tqdm's "IProgress not found" warning printed the virtual environment's folder)."""
    import json

    for path in sorted((REPO / "outputs" / "ci" / "notebooks").glob("*.ipynb")):
        outputs = json.dumps([c.get("outputs", []) for c in json.loads(path.read_text())["cells"]])
        for marker in ("site-packages", "/.venv/", str(REPO)):
            assert marker not in outputs, (path.name, marker)
