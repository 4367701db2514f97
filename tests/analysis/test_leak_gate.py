"""The leak gate (analysis.leak_gate): the metadata probe, the paired retrieval test, and the power it states."""

from __future__ import annotations

import pandas as pd
import pytest
from lookalike.analysis import leakage
from lookalike.retrieval.encoders.base import Vectors
from tests.conftest import run_from_rankings


def test_metadata_probe_sees_a_path_that_reads_the_file_name(ci_units):
    units, _ = ci_units
    pixels = lambda us: Vectors("p", "pixels", list(us["unit_id"]), [f"page {u}" for u in us["unit_id"]], "text")  # noqa: E731
    leaky = lambda us: Vectors("p", "pixels", list(us["unit_id"]),  # noqa: E731
                               [f"page {u} {f}" for u, f in zip(us["unit_id"], us["filename"])], "text")
    probe = leakage.metadata_probe({"image": pixels, "ocr-bm25": leaky}, units, seed=1)
    assert probe["image"] == (0, len(units))
    assert probe["ocr-bm25"][0] > 0.9 * len(units) and probe["pixels-rrf"] == probe["ocr-bm25"]
    per_query = pd.DataFrame({"index": "ocr-bm25", "unit_id": ["a", "a"], "query_set": ["blind", "caption-derived"],
                              "recall_10": [1.0, 1.0]})
    assert leakage.paired_gate(per_query, "ocr-bm25", probe=probe["ocr-bm25"]).verdict == "LEAK"      # no recall gain at all
    assert leakage.paired_gate(per_query, "ocr-bm25", probe=(0, 10)).verdict == "PASS"


def test_gate_decision():
    table = pd.DataFrame({"index": ["image", "image"], "query_set": ["blind", "caption-derived"],
                          "recall_10": [0.60, 0.66]})
    assert leakage.gate(table, 0.05)[0] is False
    assert leakage.gate(table, 0.10)[0] is True


def test_gate_fails_on_a_file_name_reaching_the_image_path_only_when_it_moves_the_paired_difference():
    """The paired rule on synthetic per-query values: a material, significant difference is a LEAK;
    the same mean difference on a handful of units is not significant and passes; no pairs is
    NOT EVALUATED — never a leak."""
    units = [f"u{i}" for i in range(60)]
    rows = [{"index": "image", "unit_id": u, "query_set": qs, "query_id": f"{u}-{qs}",
             "recall_10": float(qs == "caption-derived" or i % 3 == 0)} for i, u in enumerate(units)
            for qs in ("blind", "caption-derived")]
    per_query = pd.DataFrame(rows)
    leak = leakage.paired_gate(per_query, "image", 0.05, n_boot=500, seed=1)
    assert leak.verdict == "LEAK" and leak.lo > 0 and leak.n_pairs == 60
    few = leakage.paired_gate(per_query[per_query["unit_id"].isin(units[:2])], "image", 0.05, n_boot=500, seed=1)
    # two units and no probe: not a leak, and not a pass either — the test could not see a total leak
    assert few.verdict == "NOT EVALUATED" and few.lo <= 0 and few.underpowered
    none = leakage.paired_gate(per_query.head(0), "image", 0.05)
    assert none.verdict == "NOT EVALUATED" and "NOT EVALUATED" in none.sentence()


def test_a_pass_of_the_retrieval_test_states_its_power():
    """On photos the classic leak moved the image index +0.05 [0.00, +0.125] over 40 units: the gate said
    PASS on retrieval with no word that it could only have caught a leak of about 0.09 or more."""
    from lookalike.analysis.leak_gate import GateResult

    g = GateResult("team-run", 40, 0.50, 0.55, 0.05, 0.0, 0.125, 0.05, "PASS")
    assert g.detectable == pytest.approx(max(2.8016 * 0.125 / 3.92, 0.05 + 0.8416 * 0.125 / 3.92), rel=1e-3)
    said = g.sentence()
    assert "would catch a leak of about 0.09 recall@10 or more with 80% power over 40 units" in said
    assert "this system had no metadata probe" in said
    probed = GateResult("image", 40, 0.50, 0.55, 0.05, 0.0, 0.125, 0.05, "PASS", probe_changed=0, probe_n=40)
    assert "no metadata probe" not in probed.sentence() and "about 0.09" in probed.sentence()
    leak = GateResult("image", 40, 0.2, 0.6, 0.4, 0.3, 0.5, 0.05, "LEAK")
    assert "80% power" not in leak.sentence()                  # a LEAK needs no power statement
    assert GateResult("image", 0, *[float("nan")] * 5, 0.05, "NOT EVALUATED").power_words() == ""


def test_a_retrieval_test_that_cannot_see_a_total_leak_says_underpowered():
    """Blind recall 0.95 leaves 0.05 of room; a test that needs about 0.09 to catch a leak cannot see
    even a total one: with a probe the sentence says the probe is the evidence; without one (a run
    file) the verdict is NOT EVALUATED, never a bare PASS."""
    from lookalike.analysis.leak_gate import GateResult

    probed = GateResult("image", 40, 0.95, 0.97, 0.02, -0.02, 0.105, 0.05, "PASS", probe_changed=0, probe_n=40)
    assert probed.underpowered and "underpowered on this corpus" in probed.sentence()
    assert "the probe is the evidence" in probed.sentence()
    roomy = GateResult("image", 40, 0.50, 0.52, 0.02, -0.02, 0.105, 0.05, "PASS", probe_changed=0, probe_n=40)
    assert not roomy.underpowered and "underpowered" not in roomy.sentence()
    per_query = pd.DataFrame({"index": "team-run", "unit_id": [f"u{i}" for i in range(10)] * 2,
                              "query_set": ["blind"] * 10 + ["caption-derived"] * 10,
                              "recall_10": [1.0] * 9 + [0.0] + [1.0] * 10})
    g = leakage.paired_gate(per_query, "team-run", 0.05, n_boot=500, seed=1)
    assert g.verdict == "NOT EVALUATED" and "nothing here would catch a leak" in g.sentence()
    assert leakage.overall([g]) == "NOT EVALUATED"


def test_a_run_file_is_probed_by_its_run_on_the_shuffled_corpus():
    same = run_from_rankings({"q1": ["u1", "u2", "u3"], "q2": ["u3", "u1"]})
    g, notes = leakage.run_probe("team", same, same.copy())
    assert g.verdict == "PASS" and (g.probe_changed, g.probe_n) == (0, 2) and notes == []
    assert "metadata probe: 0 of 2 questions' top-10 rankings changed" in g.sentence()
    moved = run_from_rankings({"q1": ["u2", "u1", "u3"], "q2": ["u3", "u1"]})
    g, _ = leakage.run_probe("team", same, moved)
    assert g.verdict == "LEAK" and g.probe_changed == 1
    g, notes = leakage.run_probe("team", same, run_from_rankings({"q1": ["u1", "u2", "u3"]}))
    assert g.verdict == "PASS" and g.probe_n == 1 and "lacks 1 of the 2 questions" in notes[0]
    g, _ = leakage.run_probe("team", same, run_from_rankings({"q9": ["u1"]}))
    assert g.verdict == "NOT EVALUATED"


def test_the_power_measured_on_a_planted_leak_decides_underpowered():
    """Photos: the classic leak planted in the image index moved the difference only +0.05 [0.00, +0.125]
    and the retrieval test did not call it; the PASS must say the retrieval test is underpowered and
    the probe is the evidence — even where the analytic rule alone would not have said so."""
    from lookalike.analysis.leak_gate import GateResult

    base = dict(index="image", n_pairs=40, blind=0.50, derived=0.52, difference=0.02, lo=-0.02, hi=0.105,
                threshold=0.05, verdict="PASS", probe_changed=0, probe_n=40)
    missed = GateResult(**base, planted=(0.05, 0.0, 0.125, False))
    assert missed.underpowered and not GateResult(**base).underpowered
    said = missed.sentence()
    assert "underpowered on this corpus" in said and "did not catch it" in said and "the probe is the evidence" in said
    assert "+0.050 [+0.000, +0.125]" in said
    caught = GateResult(**base, planted=(0.40, 0.30, 0.50, True))
    assert not caught.underpowered and "caught it" in caught.sentence() and "underpowered" not in caught.sentence()
    per_query = pd.DataFrame({"index": "image", "unit_id": [f"u{i}" for i in range(30)] * 2,
                              "query_set": ["blind"] * 30 + ["caption-derived"] * 30,
                              "recall_10": [0.0] * 30 + [1.0] * 30})
    assert leakage.planted_power(per_query, 0.05, n_boot=200)[3] is True
    assert leakage.planted_power(per_query.head(0)) is None


def test_no_spread_in_the_differences_is_underpowered_not_a_stated_power():
    """Photos under OCR + BM25: no unit's text, every unit scores alike on both sets, the interval is
    [0, 0]; that once read 'would catch a leak of about 0.05 or more'."""
    from lookalike.analysis.leak_gate import GateResult

    flat = GateResult("ocr-bm25", 40, 0.25, 0.25, 0.0, 0.0, 0.0, 0.05, "PASS", probe_changed=0, probe_n=40)
    assert flat.underpowered and "finds no spread" in flat.sentence() and "0.05 recall@10 or more" not in flat.sentence()
