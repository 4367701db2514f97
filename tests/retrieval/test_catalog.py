"""The one registry shape and the catalogue of derived systems (lookalike.retrieval.catalog): a
derived system is built by every stage or by none, and one that is not built says why."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from lookalike import params as P
from lookalike.cli import check
from lookalike.registry import Registry
from lookalike.retrieval import catalog

PROV = {"ocr-minilm": "pixels", "ocr-bm25": "pixels", "caption-minilm": "caption-text", "colpali": "pixels"}
LIB = Path(P.__file__).resolve().parent


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
        prm = P.check({"encode": {"encoders": encoders}})
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
