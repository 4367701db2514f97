"""The judge pool (judging.pool): the union of each system's top k and the candidates, in the canonical order."""

from __future__ import annotations

import pandas as pd
from lookalike.judging import pool


def test_pool_is_the_union_of_top_k_plus_candidates():
    runs = {
        "a": pd.DataFrame({"query_id": ["q1"] * 3, "unit_id": ["u1", "u2", "u3"], "score": [3.0, 2.0, 1.0]}),
        "b": pd.DataFrame({"query_id": ["q1"] * 3, "unit_id": ["u3", "u2", "u1"], "score": [3.0, 2.0, 1.0]}),
    }
    p = pool.pool(runs, ["q1"], k=2, candidates={"q1": ["u9"], "q2": ["u8"]})
    assert list(p["unit_id"]) == ["u1", "u2", "u3", "u9"]
    row = p.set_index("unit_id")
    assert row.loc["u2", "systems"] == "a;b" and row.loc["u1", "systems"] == "a" and row.loc["u3", "best_rank"] == 1
    assert row.loc["u9", "hard_candidate"] and row.loc["u9", "systems"] == "" and row.loc["u9", "best_rank"] == 0
    by = pool.pool_by_system(p, ["a", "b"]).set_index("system")
    assert by.loc["a", "pairs"] == 2 and by.loc["a", "only_this_system"] == 1


def test_ties_in_the_pool_follow_the_canonical_order():
    run = {"a": pd.DataFrame({"query_id": ["q"] * 3, "unit_id": ["x", "z", "y"], "score": [1.0, 1.0, 1.0]})}
    # ties broken by unit id descending: z, y, x
    assert list(pool.pool(run, ["q"], k=2)["unit_id"]) == ["y", "z"]
