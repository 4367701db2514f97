"""The one registry shape and the catalogue of derived systems (lookalike.retrieval.catalog): a
derived system is built by every stage or by none, and one that is not built says why."""

from __future__ import annotations


import pandas as pd

from lookalike import params
from lookalike.analysis.scoring import CandidateSystems
from lookalike.cli import check
from lookalike.retrieval import catalog

PROV = {"ocr-minilm": "pixels", "ocr-bm25": "pixels", "caption-minilm": "caption-text", "colpali": "pixels"}


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


def test_the_candidate_scorer_leaves_out_a_doc_context_system_whose_member_was_not_encoded():
    units = pd.DataFrame({"unit_id": ["p1"], "doc_id": ["a"]})
    doc = {catalog.DOC_CONTEXT: list(catalog.SYSTEMS[catalog.DOC_CONTEXT].members)}
    assert CandidateSystems(units, {"ocr-bm25": object()}, doc_context=doc).names == ["ocr-bm25"]
    assert CandidateSystems(units, {"ocr-minilm": object()}, doc_context=doc).names == ["ocr-minilm", catalog.DOC_CONTEXT]


def test_no_document_context_where_every_unit_is_its_own_document():
    """Photos (every unit its own document) listed ocr-minilm+doc-context and the Ctx settings beside Base, row
    for row the same figures: the system is not built, and says why once."""
    from lookalike.analysis import views

    photos = [f"photo{i:03d}" for i in range(5)]
    alone = catalog.plan(["ocr-minilm", "ocr-bm25"], PROV, "07", photos)
    assert catalog.DOC_CONTEXT not in alone.built and "every unit is its own document" in alone.not_built[catalog.DOC_CONTEXT]
    assert catalog.DOC_CONTEXT in catalog.plan(["ocr-minilm", "ocr-bm25"], PROV, "07", ["a", "a", "b"]).built
    units = pd.DataFrame({"unit_id": [f"{p}:1" for p in photos], "doc_id": photos})
    runs, why = views.context_runs(["ocr-minilm"], {}, {}, units, ["q1"], {}, 10)
    assert runs == {} and why == {"ocr-minilm": "every unit is its own document, so Ctx and B+Ctx would equal Base"}
