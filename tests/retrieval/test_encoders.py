"""Each built-in encoder declares what it is built with and what it answers (EncoderSpec): no module
outside retrieval/encoders asks an encoder's name to decide how to treat it."""

from __future__ import annotations

import ast
from pathlib import Path

import lookalike
from lookalike.retrieval import encoders
from lookalike.retrieval import systems
import pytest
from lookalike.io.cache import Cache

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


def test_cache_keys_change_with_encoder_settings(tmp_path):
    cache = Cache(tmp_path)
    cache.put_text("ab" * 32, "ocr:engine-a", "old text")
    assert cache.get_text("ab" * 32, "ocr:engine-a") == "old text"
    assert cache.get_text("ab" * 32, "ocr:engine-b") is None
    a = encoders.make_encoder("ocr-minilm", ocr_engine="rapidocr", progress=False)
    b = encoders.make_encoder("ocr-minilm", ocr_engine="tesseract", progress=False)
    assert a.id != b.id


def test_cache_keys_hold_the_device_class_and_precision():
    cpu = encoders.make_encoder("ocr-minilm", progress=False)
    gpu0 = encoders.make_encoder("ocr-minilm", progress=False)
    gpu0.device, gpu0.dtype = "cuda:0", "bfloat16"          # as resolve_device gives them on a GPU machine
    gpu1 = encoders.make_encoder("ocr-minilm", progress=False)
    gpu1.device, gpu1.dtype = "cuda:1", "bfloat16"
    assert cpu.id.endswith("|cpu/float32") and gpu0.id.endswith("|cuda/bfloat16")
    assert cpu.id != gpu0.id and gpu0.id == gpu1.id         # another GPU of the same class shares entries


def test_appearance_encoder_has_no_text_side():
    with pytest.raises(encoders.EncodeError, match="pages only"):
        encoders.make_encoder("appearance").encode_queries(["x"], ["q"])


def test_missing_colpali_model_says_how_to_provide_one(tmp_path):
    with pytest.raises(encoders.EncodeError, match="set encode.colpali_model to a local folder"):
        encoders.make_encoder("colpali", model="")
    with pytest.raises(encoders.EncodeError, match="no config.json"):
        encoders.make_encoder("colpali", model=str(tmp_path))


def test_caption_text_joins_the_caption_fields():
    row = {"filename": "hg_2024q2_deck_p03.png", "alt_text": "bar chart", "caption": ""}
    assert encoders.caption_text(row) == "hg 2024q2 deck p03 bar chart"


def test_each_built_in_declares_the_settings_its_constructor_takes():
    """An encoder made on first use names its settings in its spec (its module imports heavy packages):
    they must be what its class's constructor takes, with the same types and defaults."""
    from lookalike.retrieval.encoders.clip import ClipEncoder
    from lookalike.retrieval.encoders.colpali import BiEncoder, ColPaliEncoder
    from lookalike.retrieval.encoders.endpoint import EndpointEncoder

    classes = {"colpali": ColPaliEncoder, "bi": BiEncoder, "clip": ClipEncoder, "endpoint": EndpointEncoder}
    for name, spec in encoders.ENCODERS.items():
        cls = classes.get(name, spec.make)
        assert spec.declared() == encoders.declared_settings(cls), name
        assert {"device", "batch_size"} <= set(spec.declared()) and "progress" not in spec.declared(), name


def test_a_setting_of_the_wrong_type_is_refused_naming_its_key():
    with pytest.raises(encoders.EncodeError, match=r"encode.settings.ocr-bm25.workers: expected a whole number \(int\), "
                                                   r"got 'two'"):
        systems.make_encoder("ocr-bm25", settings={"ocr-bm25": {"workers": "two"}})
    with pytest.raises(encoders.EncodeError, match=r"ocr-bm25.workers: expected a whole number \(int\), got True"):
        systems.make_encoder("ocr-bm25", settings={"ocr-bm25": {"workers": True}})
    assert systems.make_encoder("ocr-bm25", settings={"ocr-bm25": {"workers": 1}}).workers == 1
    timeout = encoders.ENCODERS["endpoint"].declared()["timeout_s"]
    timeout.check(30, "encode.settings.endpoint")                    # a whole number is a float's value too
    with pytest.raises(encoders.EncodeError, match=r"endpoint.timeout_s: expected a number \(float\), got '30s'"):
        timeout.check("30s", "encode.settings.endpoint")


def test_a_plug_ins_settings_are_its_constructors():
    spec = str(Path(__file__).resolve().parents[1] / "plugins" / "word_vectors.py") + ":WordVectors"
    declared = encoders.declared_settings(encoders.encoder_class(spec))
    assert declared["dim"] == encoders.Setting("dim", int, 32)
    name = encoders.system_name(spec)
    with pytest.raises(encoders.EncodeError, match=rf"encode.settings.{name}.dim: expected a whole number"):
        systems.make_encoder(spec, encoders=[spec], settings={name: {"dim": "wide"}})
