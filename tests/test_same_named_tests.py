"""Every module of the package that holds logic has a test file of its own name, where a newcomer looks
for it: lib/lookalike/<package>/<module>.py -> tests/<package>/test_<module>.py (a subpackage's modules
sit with their package's tests: retrieval/encoders/clip.py -> tests/retrieval/test_clip.py), a
top-level module -> tests/test_<module>.py, and a package's __init__.py is tested as the package
(cli/__init__.py -> tests/cli/test_cli.py, retrieval/encoders/__init__.py ->
tests/retrieval/test_encoders.py). A module holds logic when it
defines a function or a class; one that only imports, re-exports or names constants (an empty
__init__.py, __main__.py, analysis/leakage.py) has none to test. Other test files (a whole stage on
the ci run, the shape lane, the browser) stand beside these."""

from __future__ import annotations

import ast
from pathlib import Path

import lookalike

LIB = Path(lookalike.__file__).resolve().parent
TESTS = Path(__file__).resolve().parent


def has_logic(source: str) -> bool:
    """Whether a module defines a function or a class (anywhere in it)."""
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in ast.walk(ast.parse(source)))


def own_test_file(module: Path, lib: Path, tests: Path) -> Path:
    """Where the module's own tests live."""
    rel = module.relative_to(lib)
    stem = rel.parent.name if rel.name == "__init__.py" else rel.stem
    if rel.name == "__init__.py" and rel.parent == Path("."):
        stem = lib.name
    folder = tests / rel.parts[0] if len(rel.parts) > 1 else tests
    return folder / f"test_{stem}.py"


def missing(lib: Path, tests: Path) -> list[str]:
    """The modules with logic whose same-named test file is absent, each with the file expected."""
    out = []
    for module in sorted(lib.rglob("*.py")):
        if has_logic(module.read_text(encoding="utf-8")) and not own_test_file(module, lib, tests).is_file():
            out.append(f"{module.relative_to(lib.parent)} -> {own_test_file(module, lib, tests).relative_to(tests.parent)}")
    return out


def test_every_module_with_logic_has_its_own_test_file():
    assert missing(LIB, TESTS) == []


def test_the_rule_names_where_each_module_is_tested():
    lib, tests = Path("/x/lib/lookalike"), Path("/x/tests")
    assert own_test_file(lib / "api.py", lib, tests) == tests / "test_api.py"
    assert own_test_file(lib / "__init__.py", lib, tests) == tests / "test_lookalike.py"
    assert own_test_file(lib / "eval" / "stats.py", lib, tests) == tests / "eval" / "test_stats.py"
    assert own_test_file(lib / "cli" / "__init__.py", lib, tests) == tests / "cli" / "test_cli.py"
    assert own_test_file(lib / "retrieval" / "encoders" / "clip.py", lib, tests) == tests / "retrieval" / "test_clip.py"
    assert own_test_file(lib / "retrieval" / "encoders" / "__init__.py", lib, tests) == tests / "retrieval" / "test_encoders.py"


def test_the_rule_sees_a_module_without_its_test_file(tmp_path):
    lib, tests = tmp_path / "lib" / "lookalike", tmp_path / "tests"
    (lib / "eval").mkdir(parents=True)
    (tests / "eval").mkdir(parents=True)
    (lib / "eval" / "__init__.py").write_text('"""A package."""\n')
    (lib / "eval" / "stats.py").write_text("def mean(xs):\n    return sum(xs) / len(xs)\n")
    (lib / "eval" / "names.py").write_text("from os import sep  # a re-export: no logic\nNAMES = ('a',)\n")
    (lib / "facade.py").write_text("from lookalike.eval.stats import mean  # noqa: F401\n")
    assert missing(lib, tests) == ["lookalike/eval/stats.py -> tests/eval/test_stats.py"]
    (tests / "eval" / "test_stats.py").write_text("")
    assert missing(lib, tests) == []
