"""The plug-in authors' surface (lookalike.plugin)."""

from __future__ import annotations

import ast
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]


def test_the_plugin_example_imports_only_the_plugin_surface():
    tree = ast.parse((REPO / "examples" / "plugin_encoder" / "hashed_ocr.py").read_text())
    used = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("lookalike")}
    used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name.startswith("lookalike")}
    assert used == {"lookalike.plugin"}
    import lookalike.plugin as plugin

    for name in plugin.__all__:
        assert getattr(plugin, name) is not None
