"""Every pluggable thing lookalike names in parameters comes from one Registry, and the values the
parameter schema allows for those keys are the registries' names (a new judge, reranker, fusion method
or corpus source cannot be added to one and forgotten in the other)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lookalike import params
from lookalike.io import corpus
from lookalike.judging import judges
from lookalike.registry import Registry, UnknownName
from lookalike.retrieval import derived, fusion
import re
from pathlib import Path
from lookalike.retrieval import catalog

# keys that name a judge: the tags of the judges each allows (None: any) and its words besides them
JUDGE_KEYS = {"validate.judge": (None, {"auto"}), "validate.compare_judge": (None, {""}),
              "labels.model_judge": ({"model"}, set()), "mining.judge": ({"model", "reference"}, {"auto"}),
              "mining.compare_judge": ({"model", "reference"}, {""})}


def drift(key: str, registry: Registry, extra: set[str] = frozenset()) -> str:
    """What the schema and the registry disagree on for a key that names exactly the registry's entries."""
    allowed = set(params.allowed_values(key) or []) - set(extra)
    names = set(registry.names())
    return "" if allowed == names else f"{key}: schema only {sorted(allowed - names)}, registry only {sorted(names - allowed)}"


@pytest.mark.parametrize("key,registry", [("corpus.source", corpus.SOURCES), ("rerank.method", derived.RERANKERS)],
                         ids=["corpus.source", "rerank.method"])
def test_schema_values_are_the_registry_names(key, registry):
    assert not drift(key, registry)


@pytest.fixture
def judges_registry(monkeypatch):
    """The judge registry, restored after the test (a judge registered in it is gone again)."""
    monkeypatch.setattr(judges.REGISTRY, "_specs", dict(judges.REGISTRY._specs))
    return judges.REGISTRY


@pytest.mark.parametrize("source", ["model", "human", "reference"])
def test_a_judge_key_allows_the_judges_registered_when_the_run_is_checked(judges_registry, source):
    """The judge keys' allowed values are read from the registry at check time, by the source of the
    judge's labels: a judge registered after lookalike was imported is allowed where its kind is."""
    class Newcomer:
        capabilities = judges.Capabilities(source)

        @classmethod
        def from_resources(cls, **_):
            return cls()

        def judge(self, question, unit):
            return judges.Judgement("irrelevant", "", self.name)

    for key in JUDGE_KEYS:
        assert "newcomer" not in params.allowed_values(key)
    judges.register("newcomer", "a judge of this test")(Newcomer)
    for key, (tags, words) in JUDGE_KEYS.items():
        fits = tags is None or source in tags
        assert ("newcomer" in params.allowed_values(key)) == fits, key
        assert set(params.allowed_values(key)) == words | {n for n in judges.REGISTRY if tags is None
                                                      or judges.REGISTRY[n].capabilities.source in tags}
        section, name = key.split(".")
        if fits:
            params.check({section: {name: "newcomer"}})
        else:
            with pytest.raises(params.ParamsError, match=f"key '{key}' must be one of .*a judge of the kind this key needs"):
                params.check({section: {name: "newcomer"}})


def test_the_drift_check_fails_when_a_registry_grows(monkeypatch):
    """Registering a reranker the schema's closed list does not name (or listing one nobody registered)
    is caught (corpus.source reads its registry, so it cannot drift)."""
    from lookalike import registry

    monkeypatch.setattr(registry, "_ALL", dict(registry._ALL))     # a Registry enters itself there by name

    @dataclass(frozen=True)
    class Spec:
        name: str

    grown: Registry = Registry("rerank.method")
    for name in derived.RERANKERS:
        grown.register(Spec(name))
    grown.register(Spec("sharepoint"))
    assert "registry only ['sharepoint']" in drift("rerank.method", grown)
    shrunk: Registry = Registry("rerank.method")
    shrunk.register(Spec("endpoint"))
    assert "schema only" in drift("rerank.method", shrunk)


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
    from lookalike.retrieval import encoders
    from lookalike.retrieval.encoders.base import PROVENANCES

    assert {"ocr-minilm", "ocr-bm25", "caption-minilm", "appearance", "colpali", "bi", "clip", "endpoint"} <= set(encoders.ENCODERS)
    for name, spec in encoders.ENCODERS.items():
        assert spec.name == name and spec.provenance in PROVENANCES and spec.kind in encoders.KINDS
        assert encoders.encoder_class(name) is spec and encoders.has_captions(name) == spec.captions
    # a class's own declaration is what its spec says (the spec is not a second place to keep in step)
    assert encoders.ENCODERS["ocr-minilm"].reads_ocr and encoders.ENCODERS["ocr-minilm"].make is encoders.OcrMiniLM
    with pytest.raises(encoders.EncodeError, match="unknown encoder 'ocr-minlm'"):
        encoders.encoder_class("ocr-minlm")


def test_a_corpus_source_registered_when_the_run_is_checked_is_allowed(monkeypatch):
    """corpus.source's allowed values are the registry's (names: corpus.source), read when the run is
    checked: a source registered in lookalike.io.corpus.SOURCES is accepted without touching the schema."""
    monkeypatch.setattr(corpus.SOURCES, "_specs", dict(corpus.SOURCES._specs))
    with pytest.raises(params.ParamsError, match="key 'corpus.source' must be one of demo, manifest, pdf, images, beir, "
                                                 "vidore.*got 'a-test-only-source'"):
        params.check({"corpus": {"source": "a-test-only-source"}})
    corpus.SOURCES.register(corpus.SourceSpec("a-test-only-source", "manifest", lambda root, out_dir, o: None, "a test's"))
    assert params.check({"corpus": {"source": "a-test-only-source"}})["corpus"]["source"] == "a-test-only-source"


LIB = Path(params.__file__).resolve().parent


def test_no_stage_names_a_derived_system_by_its_literal():
    for path in sorted((LIB / "stages").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for spec in catalog.SYSTEMS.values():
            assert not re.search(rf"""["']{re.escape(spec.name)}["']""", text), f"{path.name} names {spec.name}"


@dataclass(frozen=True)
class _Thing:
    name: str


def test_a_registry_refuses_a_second_name_and_suggests_a_first():
    reg: Registry[_Thing] = Registry("widget")
    reg.register(_Thing("sparse"))
    reg.register(_Thing("dense"))
    with pytest.raises(ValueError, match="registered twice"):
        reg.register(_Thing("dense"))
    with pytest.raises(KeyError, match="did you mean dense"):
        reg["dens"]
    assert reg.names() == ["sparse", "dense"] and "dense" in reg and len(reg) == 2


BUILDERS = ["stages/*.py", "analysis/scoring.py", "analysis/views.py", "retrieval/systems.py"]


def test_nothing_that_builds_systems_names_a_derived_system_or_the_member_it_rescores():
    """The stages, the candidate scorer and the run builder take a derived system's members (and a
    doc-context system's number of context vectors) from its spec, never from a literal."""
    rescored = {m for spec in catalog.SYSTEMS.values() if spec.how == "doc-context" for m in spec.members}
    for pattern in BUILDERS:
        for path in sorted(LIB.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            for name in [spec.name for spec in catalog.SYSTEMS.values()] + sorted(rescored):
                assert not re.search(rf"""["']{re.escape(name)}["']""", text), f"{path.name} names {name}"


def test_the_literal_check_sees_a_member_named_in_a_stage():
    text = 'if "ocr-minilm" in runs and plan.has(catalog.DOC_CONTEXT):'
    assert re.search(r"""["']ocr-minilm["']""", text)


# ------------------------------------------------------------------ one loader for every kind of plug-in

PLUGIN_FILES = {
    "syntax.py": "def broken(:\n",
    "raises.py": "raise RuntimeError('cannot import me')\n",
    "value.py": "X = 3\n",
    "plain.py": "class Plain:\n    pass\n",
    "boom.py": ("from lookalike.retrieval.encoders import Encoder\n"
                "class Boom(Encoder):\n    name, provenance, kind = 'boom', 'pixels', 'single'\n"
                "    def __init__(self, **kw):\n        raise RuntimeError('no weights at /models/x')\n"
                "    def encode_units(self, units, base_dir, cache):\n        return None\n"
                "    def encode_queries(self, questions):\n        return None\n"),
}
# (spec, what the refusal says) — the same for an encoder and a judge
FAILS = [("missing.py:X", "no file"), ("syntax.py:X", "SyntaxError"), ("raises.py:X", "RuntimeError: cannot import me"),
         ("plain.py:Nope", "has no 'Nope'"), ("value.py:X", "not a class"), ("plain.py:Plain", "set a class attribute name")]


@pytest.fixture
def plugin_dir(tmp_path):
    for name, text in PLUGIN_FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("kind", ["encoder", "judge"])
@pytest.mark.parametrize("spec, words", FAILS)
def test_every_way_a_plugin_fails_to_load_is_one_refusal_in_words(plugin_dir, kind, spec, words):
    from lookalike import registry
    from lookalike.retrieval import encoders

    full = f"{plugin_dir / spec.split(':')[0]}:{spec.split(':')[1]}"
    load = encoders.encoder_class if kind == "encoder" else (lambda s: judges.REGISTRY.plugin(s, []))
    with pytest.raises(registry.PluginError) as refused:
        load(full)
    assert isinstance(refused.value, ValueError) and str(refused.value).startswith(f"{kind} ")
    assert words in str(refused.value) and full in str(refused.value)


def test_check_refuses_an_encoder_plugin_that_does_not_load_without_a_traceback(plugin_dir, tmp_path, capsys):
    """An encoder plug-in that did not load ended `lookalike check` in a traceback (a judge's was refused)."""
    from lookalike.cli import main

    for spec, words in FAILS:
        path = tmp_path / "run.yaml"
        path.write_text(f"run: p\ncorpus:\n  source: demo\n  demo_size: ci\nencode:\n  encoders: "
                        f"['{plugin_dir / spec.split(':')[0]}:{spec.split(':')[1]}']\n", encoding="utf-8")
        assert main(["check", str(path)]) == 1
        out = capsys.readouterr()
        assert "encoder plug-in" in out.out and "REFUSED" in out.out and words in out.out, out.out
        assert "Traceback" not in out.out + out.err


def test_a_plugin_encoder_whose_constructor_raises_is_named_with_its_error(plugin_dir):
    """It passed `check` and failed in stage 02 without the plug-in's name."""
    from lookalike.retrieval import encoders

    spec = f"{plugin_dir / 'boom.py'}:Boom"
    with pytest.raises(encoders.EncodeError, match=r"encoder '.*boom.py:Boom': constructing Boom failed: "
                                                   r"RuntimeError: no weights at /models/x"):
        encoders.make_encoder(spec)
