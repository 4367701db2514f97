"""A corpus source a plug-in registers (lookalike.plugin.register_source): named in params by the name it
registers, its rows checked as a manifest's, a taken name refused."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import REPO, make_png, write_params
from lookalike import params as P
from lookalike.io import corpus as corpus_io
from lookalike.plugin import CorpusError, register_source

EXAMPLE = REPO / "examples" / "plugin_source" / "jsonl_pages.py"


@pytest.fixture
def registered():
    """Names this test registers leave the registry when it ends."""
    names: list[str] = []
    yield names
    for name in names:
        corpus_io.SOURCES._specs.pop(name, None)


def test_the_rows_a_source_returns_are_checked_as_a_manifests(tmp_path, registered):
    make_png(tmp_path / "a.png")
    registered.append("two-rows")

    @register_source("two-rows")
    def two_rows(root, options):
        return pd.DataFrame({"image_path": ["a.png", "gone.png", "a.png"], "unit_id": ["d:1", "d:2", "d 3"]})

    got = corpus_io.load("two-rows", 0, tmp_path / "out", root=str(tmp_path))
    assert got.units["unit_id"].tolist() == ["d:1"]
    assert got.skipped["source"].tolist() == ["corpus.source two-rows"] * 2
    assert "gone.png" in got.skipped["problem"].iloc[0] and "whitespace" in got.skipped["problem"].iloc[1]
    with pytest.raises(CorpusError, match="row 2"):
        corpus_io.load("two-rows", 0, tmp_path / "out", root=str(tmp_path), strict=True)


def test_a_source_that_returns_no_table_or_takes_a_built_in_name_is_refused(tmp_path, registered):
    registered.append("not-a-table")

    @register_source("not-a-table")
    def nothing(root, options):
        return [{"image_path": "a.png"}]

    with pytest.raises(CorpusError, match="returned list, expected a DataFrame"):
        corpus_io.load("not-a-table", 0, tmp_path, root=str(tmp_path))
    with pytest.raises(ValueError, match="registered twice"):
        register_source("pdf")(lambda root, options: pd.DataFrame())


def test_a_plug_in_source_is_named_in_params_once_its_module_is_listed(tmp_path):
    """Before register_source, corpus.source took only the built-in names: a source from a plug-in file
    could not be named at all."""
    root = tmp_path / "listed"
    make_png(root / "p1.png")
    (root / "pages.jsonl").write_text('{"file": "p1.png", "document": "doc", "page": 1, "caption": "x"}\n')
    params = write_params(tmp_path / "mine.yaml", f"run: mine\nplugins: [{EXAMPLE}]\n"
                                                  f"corpus:\n  source: jsonl-pages\n  root: {root}\n")
    merged = P.load_params(params)
    assert merged["corpus"]["source"] == "jsonl-pages"
    got = corpus_io.load("jsonl-pages", 0, tmp_path / "out", root=str(root))
    assert got.units[["unit_id", "caption"]].values.tolist() == [["doc:1", "x"]]
    bad = write_params(tmp_path / "bad.yaml", f"run: bad\ncorpus:\n  source: jsonl-pagez\n  root: {root}\n")
    with pytest.raises(P.ParamsError, match="corpus.source"):
        P.load_params(bad)
