"""Every pluggable thing lookalike names in parameters comes from one Registry, and the values the
parameter schema allows for those keys are the registries' names (a new judge, reranker, fusion method
or corpus source cannot be added to one and forgotten in the other)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lookalike import params as P
from lookalike.io import corpus
from lookalike.judging import judges as J
from lookalike.registry import Registry, UnknownName
from lookalike.retrieval import derived, fusion

# keys that name a judge, and the words each allows besides the registered judges
JUDGE_KEYS = {"validate.judge": {"auto"}, "validate.compare_judge": {""}, "labels.model_judge": set(),
              "labels.adjudicator": {"auto", "none"}, "mining.judge": {"auto"}, "mining.compare_judge": {""}}


def drift(key: str, registry: Registry, extra: set[str] = frozenset()) -> str:
    """What the schema and the registry disagree on for a key that names exactly the registry's entries."""
    allowed = set(P.allowed_values(key) or []) - set(extra)
    names = set(registry.names())
    return "" if allowed == names else f"{key}: schema only {sorted(allowed - names)}, registry only {sorted(names - allowed)}"


@pytest.mark.parametrize("key,registry", [("corpus.source", corpus.SOURCES), ("rerank.method", derived.RERANKERS),
                                          ("validate.judge", J.REGISTRY)],
                         ids=["corpus.source", "rerank.method", "validate.judge"])
def test_schema_values_are_the_registry_names(key, registry):
    assert not drift(key, registry, JUDGE_KEYS.get(key, set()))


def test_every_judge_key_names_only_registered_judges():
    for key, words in JUDGE_KEYS.items():
        allowed = P.allowed_values(key)
        assert allowed, key
        unknown = set(allowed) - words - set(J.REGISTRY)
        assert not unknown, f"{key} allows {sorted(unknown)}, which no judge is registered as"


def test_the_drift_check_fails_when_a_registry_grows(monkeypatch):
    """Registering a source the schema does not list (or listing one nobody registered) is caught."""
    @dataclass(frozen=True)
    class Spec:
        name: str

    grown: Registry = Registry("corpus.source")
    for name in corpus.SOURCES:
        grown.register(Spec(name))
    grown.register(Spec("sharepoint"))
    assert "registry only ['sharepoint']" in drift("corpus.source", grown)
    shrunk: Registry = Registry("corpus.source")
    shrunk.register(Spec("demo"))
    assert "schema only" in drift("corpus.source", shrunk)


def test_fusion_methods_are_one_registry_and_refuse_an_unknown_name():
    assert fusion.FUSIONS.names() == ["rrf", "round-robin", "score-sum"]
    with pytest.raises(ValueError, match="unknown fusion method 'rff'; did you mean rrf"):
        fusion.fuse("rff", [])
    with pytest.raises(UnknownName):
        derived.RERANKERS["cross_encoder"]


def test_an_unknown_corpus_source_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(Exception, match="corpus.source must be one of 'demo', 'manifest'"):
        corpus.load("sharepoint", 0, tmp_path)


def test_encoders_are_one_registry_of_specs_that_declare_what_they_read():
    from lookalike.retrieval import encoders as E
    from lookalike.retrieval.encoders.base import PROVENANCES

    assert {"ocr-minilm", "ocr-bm25", "caption-minilm", "appearance", "colpali", "bi", "clip", "endpoint"} <= set(E.ENCODERS)
    for name, spec in E.ENCODERS.items():
        assert spec.name == name and spec.provenance in PROVENANCES and spec.kind in E.KINDS
        assert E.encoder_class(name) is spec and E.has_captions(name) == spec.captions
    # a class's own declaration is what its spec says (the spec is not a second place to keep in step)
    assert E.ENCODERS["ocr-minilm"].reads_ocr and E.ENCODERS["ocr-minilm"].make is E.OcrMiniLM
    with pytest.raises(E.EncodeError, match="unknown encoder 'ocr-minlm'"):
        E.encoder_class("ocr-minlm")
