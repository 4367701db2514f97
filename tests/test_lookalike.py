"""The package's top level (lookalike/__init__.py): importing it stays light and names the public API, loaded on first use."""

from __future__ import annotations

import subprocess
import sys
import pytest
import lookalike


def test_import_lookalike_stays_light_and_names_its_api():
    code = "import sys, lookalike; print('pandas' in sys.modules); print(sorted(lookalike.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "False"
    for name in ("Qrels", "Run", "read_qrels", "read_run", "parse_measure", "evaluate", "compare", "Report",
                 "open_run"):
        assert name in out[1] and getattr(lookalike, name) is not None
    with pytest.raises(AttributeError):
        lookalike.no_such_name  # noqa: B018
