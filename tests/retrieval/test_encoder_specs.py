"""Each built-in encoder declares what it is built with and what it answers (EncoderSpec): no module
outside retrieval/encoders asks an encoder's name to decide how to treat it."""

from __future__ import annotations

import ast
from pathlib import Path

import lookalike
from lookalike.retrieval import encoders as E
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
    names = set(E.ENCODERS)
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
    settings = {name: systems.encoder_settings(name, device="cpu", batch_size=4, **given) for name in E.ENCODERS}
    assert settings["ocr-minilm"] == base | {"ocr_engine": "tesseract", "workers": 2, "text_source": "auto"}
    assert settings["ocr-bm25"] == settings["ocr-minilm"]
    assert settings["colpali"] == base | {"model": "m", "family": "f"}
    assert settings["endpoint"] == base | given["endpoint"]
    assert settings["clip"] == settings["bi"] == settings["appearance"] == settings["caption-minilm"] == base
    # a key the run leaves out is not set (the encoder's own default stands)
    assert systems.encoder_settings("endpoint", endpoint={"url": "u"}) == {"device": "auto", "batch_size": 32, "url": "u"}


def test_only_appearance_answers_no_question():
    assert [n for n in E.ENCODERS if not E.answers_queries(n)] == ["appearance"]
    assert E.answers_queries("examples/plugin_encoder/hashed_ocr.py:HashedOcr")
