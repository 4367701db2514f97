"""Each built-in encoder declares what it is built with and what it answers (EncoderSpec): no module
outside retrieval/encoders asks an encoder's name to decide how to treat it."""

from __future__ import annotations

import ast
from pathlib import Path

import lookalike
from lookalike.retrieval import encoders
from lookalike.retrieval import systems

LIB = Path(lookalike.__file__).resolve().parent


def name_branches(source: str, names: set[str]) -> list[int]:
    """Lines comparing something with a built-in encoder's name: == or != a name, or in / not in a
    literal list of names. (Looking a system's results up by its name — "appearance" in vectors — is
    reading data, not deciding how to treat an encoder.)"""
    def is_name(node) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.Eq, ast.NotEq)) and (is_name(left) or is_name(right)):
                lines.append(node.lineno)
                break
            if (isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set))
                    and any(is_name(e) for e in right.elts)):
                lines.append(node.lineno)
                break
            left = right
    return lines


def test_no_branch_on_an_encoders_name_outside_its_own_modules():
    names = set(encoders.ENCODERS)
    found = {p.relative_to(LIB).as_posix(): name_branches(p.read_text(encoding="utf-8"), names)
             for p in sorted(LIB.rglob("*.py")) if "retrieval/encoders" not in p.as_posix()}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_check_sees_a_branch_on_a_name():
    names = {"colpali", "appearance"}
    assert name_branches('if name == "colpali":\n    pass\n', names) == [1]
    assert name_branches('x = [n for n in a if n != "appearance"]\n', names) == [1]
    assert name_branches('ok = name in ("bi", "colpali")\n', names) == [1]
    assert name_branches('ok = name == "ocr"\n', names) == []
    assert name_branches('ok = "appearance" in vectors\n', names) == []


def test_each_built_in_gets_the_run_keys_it_declares():
    given = dict(ocr_engine="tesseract", workers=2, text_source="auto", colpali_model="m", colpali_family="f",
                 endpoint={"url": "http://x", "model": "e", "api_key_env": "K", "dimensions": 8, "image_prompt": ""})
    base = {"device": "cpu", "batch_size": 4}
    settings = {name: systems.encoder_settings(name, device="cpu", batch_size=4, **given) for name in encoders.ENCODERS}
    assert settings["ocr-minilm"] == base | {"ocr_engine": "tesseract", "workers": 2, "text_source": "auto"}
    assert settings["ocr-bm25"] == settings["ocr-minilm"]
    assert settings["colpali"] == base | {"model": "m", "family": "f"}
    assert settings["endpoint"] == base | given["endpoint"]
    assert settings["clip"] == settings["bi"] == settings["appearance"] == settings["caption-minilm"] == base
    # a key the run leaves out is not set (the encoder's own default stands)
    assert systems.encoder_settings("endpoint", endpoint={"url": "u"}) == {"device": "auto", "batch_size": 32, "url": "u"}


def test_only_appearance_answers_no_question():
    assert [n for n in encoders.ENCODERS if not encoders.answers_queries(n)] == ["appearance"]
    assert encoders.answers_queries("examples/plugin_encoder/hashed_ocr.py:HashedOcr")


def test_the_appearance_neighbour_check_is_a_blocked_sample_not_an_n_by_n_matrix(monkeypatch):
    """Stage 02's appearance check held every unit's similarity to every other (37 GiB at 100,000 units,
    found by benchmarks/scale_pipeline.py): now a block of units at a time, and at most NEIGHBOUR_SAMPLE
    units looked up (seeded); up to that size the figure is the exact all-units one."""
    import numpy as np

    from lookalike.retrieval.encoders import appearance

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((300, 8)).astype(np.float32)
    templates = rng.integers(0, 4, size=300).astype(str)

    def brute(rows):
        sims = vectors @ vectors.T
        np.fill_diagonal(sims, -np.inf)
        return float(np.mean(templates[sims.argmax(axis=1)[rows]] == templates[rows]))

    monkeypatch.setattr(appearance, "NEIGHBOUR_BLOCK_CELLS", 7 * 300)          # blocks of 7 units
    observed, chance, n = appearance.same_template_neighbour_rate(vectors, templates)
    assert n == 300 and observed == brute(np.arange(300))
    _, counts = np.unique(templates, return_counts=True)
    assert chance == float(np.sum(counts * (counts - 1)) / (300 * 299))
    sampled, _, n = appearance.same_template_neighbour_rate(vectors, templates, sample=50, seed=1)
    rows = np.sort(np.random.default_rng(1).choice(300, size=50, replace=False))
    assert n == 50 and sampled == brute(rows)
