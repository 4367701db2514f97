"""The one registry shape and the catalogue of derived systems (lookalike.retrieval.catalog): a
derived system is built by every stage or by none, and one that is not built says why."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lookalike import params
from lookalike.analysis.scoring import CandidateSystems
from lookalike.cli import check
from lookalike.registry import Registry
from lookalike.retrieval import catalog, doc_context
from lookalike.retrieval.encoders.base import Vectors

PROV = {"ocr-minilm": "pixels", "ocr-bm25": "pixels", "caption-minilm": "caption-text", "colpali": "pixels"}
LIB = Path(params.__file__).resolve().parent


def test_the_demo_systems_build_every_derived_system():
    plan = catalog.plan(["ocr-minilm", "ocr-bm25", "caption-minilm"], PROV, "07")
    assert plan.built == {"pixels-rrf": ["ocr-minilm", "ocr-bm25"], "hybrid-rrf": ["ocr-minilm", "ocr-bm25", "caption-minilm"],
                          "ocr-minilm+doc-context": ["ocr-minilm"]}
    assert plan.not_built == {} and list(plan.fusions()) == ["pixels-rrf", "hybrid-rrf"]


def test_a_run_without_captions_has_no_hybrid_and_says_why():
    """Before, stage 07 fused every system into hybrid-rrf when there were two, while stage 06 pooled
    hybrid-rrf only with caption-minilm among three or more: on OCR-only runs stage 07 scored a system
    whose candidates stage 06 never pooled. Now both ask the catalogue."""
    plan = catalog.plan(["ocr-minilm", "ocr-bm25"], PROV, "07")
    assert "hybrid-rrf" not in plan.built and "pixels-rrf" in plan.built
    assert "read no caption-text" in plan.not_built["hybrid-rrf"]
    assert catalog.plan(["ocr-minilm", "ocr-bm25"], PROV, "06").built == plan.built


def test_photos_with_captions_fuse_pixels_and_captions_but_have_no_pixels_rrf():
    plan = catalog.plan(["ocr-bm25", "caption-minilm"], PROV, "06")
    assert plan.built == {"hybrid-rrf": ["ocr-bm25", "caption-minilm"]}
    assert "needs ocr-minilm" in plan.not_built["pixels-rrf"]
    assert "needs ocr-minilm" in plan.not_built["ocr-minilm+doc-context"]


def test_stage_02_fuses_only_what_it_ranks_first():
    assert list(catalog.plan(["ocr-minilm", "ocr-bm25", "caption-minilm"], PROV, "02").built) == ["pixels-rrf"]


def test_lookalike_check_names_the_systems_stage_07_builds():
    for encoders in (["ocr-minilm", "ocr-bm25", "caption-minilm", "appearance"], ["ocr-minilm", "ocr-bm25", "appearance"],
                     ["ocr-bm25", "caption-minilm", "appearance"]):
        prm = params.check({"encode": {"encoders": encoders}})
        base = [e for e in encoders if e != "appearance"]
        assert check.run_systems(prm) == set(encoders) | set(catalog.plan(base, PROV, "07").built)


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


def _multi_vectors(rng, n, tokens=5, dim=8):
    return [rng.normal(size=(tokens, dim)).astype("float32") for _ in range(n)]


def test_a_doc_context_system_is_scored_with_its_specs_context_vectors():
    rng = np.random.default_rng(3)
    pages, queries = _multi_vectors(rng, 6), _multi_vectors(rng, 2, tokens=3)
    docs = ["a", "a", "a", "b", "b", "b"]
    member = "ocr-minilm"
    units = {member: Vectors("u", "pixels", [f"p{i}" for i in range(6)], pages, "multi")}
    qv = {member: Vectors("q", "query-text", ["q1", "q2"], queries, "multi")}
    spec = catalog.SYSTEMS[catalog.DOC_CONTEXT]
    score = doc_context.system_scorer(spec.name, [member], units, docs, seed=0)
    got = score(qv[member])
    same = doc_context.document_context_scores(queries, pages, docs, n_context=spec.context_vectors, seed=0)
    other = doc_context.document_context_scores(queries, pages, docs, n_context=1, seed=0)
    assert np.array_equal(got, same) and not np.allclose(got, other)
    # the context vectors are found once: a block of questions at a time scores as all of them at once (to
    # float32 rounding: the matrix product's summation order follows the block's shape)
    one_by_one = np.vstack([score(qv[member].take([0])), score(qv[member].take([1]))])
    assert np.allclose(one_by_one, same, rtol=1e-6, atol=0)


def test_the_candidate_scorer_leaves_out_a_doc_context_system_whose_member_was_not_encoded():
    units = pd.DataFrame({"unit_id": ["p1"], "doc_id": ["a"]})
    doc = {catalog.DOC_CONTEXT: list(catalog.SYSTEMS[catalog.DOC_CONTEXT].members)}
    assert CandidateSystems(units, {"ocr-bm25": object()}, doc_context=doc).names == ["ocr-bm25"]
    assert CandidateSystems(units, {"ocr-minilm": object()}, doc_context=doc).names == ["ocr-minilm", catalog.DOC_CONTEXT]
