"""Stage 08, mined candidates (stages.mined_candidates)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_mined_rules_pick_the_same_count(results):
    _, out = results
    rules = out["mined_candidates"].tables["negative_rules"]
    assert len(rules) and (rules["n_negatives"] <= rules["n_queries"] * 4).all()
