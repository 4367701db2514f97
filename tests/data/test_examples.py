"""`lookalike example NAME`: the generated corpora the README's params/examples/ files run on."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from lookalike.cli import check, main

REPO = Path(__file__).resolve().parents[2]


def _digest(folder: Path) -> dict:
    # every file, PDFs included, is the same bytes for the same seed
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name, params", [("documents", "documents.yaml"), ("photos", "photos-captions.yaml")])
def test_each_example_is_written_and_passes_lookalike_check(name, params, tmp_path, capsys):
    assert main(["example", name, str(tmp_path / "a")]) == 0
    assert main(["example", name, str(tmp_path / "b")]) == 0
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    text = (REPO / "params" / "examples" / params).read_text()
    assert f"examples/generated/{name}/" in text
    run_file = tmp_path / params
    run_file.write_text(text.replace(f"examples/generated/{name}/", f"{tmp_path / 'a'}/"))
    capsys.readouterr()
    assert check.main([str(run_file)]) == 0
    out = capsys.readouterr().out
    assert "0 refused" in out and "0 skipped" in out
    if name == "photos":
        assert "14 questions without an answer" in out


def test_a_generated_pdf_carries_a_fixed_date_not_the_clock(tmp_path):
    # two PDFs written within the same second would match even when stamped with the clock: read the stamp
    from lookalike.data import examples

    examples.write_pdfs(tmp_path, {"doc": [["a title", "a line"]]})
    data = (tmp_path / "doc.pdf").read_bytes()
    assert data.count(b"D:20240101000000") == 2          # CreationDate and ModDate


def test_another_seed_draws_another_corpus(tmp_path):
    main(["example", "photos", str(tmp_path / "a")])
    main(["example", "photos", str(tmp_path / "b"), "--seed", "1"])
    assert _digest(tmp_path / "a") != _digest(tmp_path / "b")
