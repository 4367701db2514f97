"""Stage 03, the leak ablation (stages.leak_ablation): the planted leak caught, a pixel system whose blind queries lose fails the gate, the gate on the clean ci run, the pool's labels."""

from __future__ import annotations

import copy
import numpy as np
from tests.stages.recording import (MODULES, call, recorded_input)
import pytest


def test_leak_planted_section_without_a_planted_leak(recorded):
    gates = recorded_input(recorded, "leak_ablation", "planted_section", "gates")
    sec, = MODULES["leak_ablation"].planted_section(gates, None)
    assert sec.tables["leak_planted"].empty and "no planted leak on this corpus" in sec.text["planted"]
    sec, = call(recorded, "leak_ablation", "planted_section")          # the demo plants one: the gate must catch it
    planted = sec.tables["leak_planted"]
    assert (planted.loc[planted["input"] == "pixels + file name", "verdict"] == "LEAK").any()


def test_leak_gate_fails_a_pixel_system_whose_blind_queries_lose(recorded):
    """The gate section's verdict follows its input: caption-derived queries that find every unit while
    blind ones find none is a leak, whatever the threshold allows for noise."""
    ab = copy.copy(recorded_input(recorded, "leak_ablation", "gate_section", "ab"))
    pq = ab.pixel_pq.copy()
    pq["recall_10"] = np.where(pq["query_set"] == "blind", 0.0, 1.0)
    ab.pixel_pq = pq
    per_query = recorded_input(recorded, "leak_ablation", "gate_section", "per_query")
    sec, gates, verdict, decision = call(recorded, "leak_ablation", "gate_section", ab=ab, per_query=per_query)
    assert decision == "LEAK" and "LEAK" in set(sec.tables["leak_gate"]["verdict"])


@pytest.mark.slow
def test_leak_gate_passes_on_the_clean_ci_run(results):
    _, out = results
    assert "PASS" in out["leak_ablation"].text["gate"]
    table = out["leak_ablation"].tables["leak_ablation"]
    assert set(table["index"]) == {"image", "caption", "both"}


@pytest.mark.slow
def test_stage_03_labels_its_pool_with_the_three_labels(results):
    _, out = results
    judgements = out["leak_ablation"].tables["judgements"]
    assert set(judgements["label"]) <= {"sufficient", "supporting", "irrelevant"}
    assert (judgements["grade"] == judgements["label"].map({"sufficient": 2, "supporting": 1, "irrelevant": 0})).all()
    assert list(out["leak_ablation"].tables["judging_sheet"].columns) == ["item", "query", "label"]
