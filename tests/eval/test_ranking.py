"""The ranking rule (eval.ranking): ties by unit id descending, uniform and ragged runs, runs from dicts, rank_of and tie-settled questions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from lookalike.eval import metrics
from lookalike.eval import ranking
from lookalike.eval import trec


def test_ties_break_by_unit_id_descending_and_rank_column_is_ignored():
    frame = pd.DataFrame({"query_id": ["q"] * 4, "unit_id": ["b", "a", "c", "B"], "score": [1.0, 1.0, 1.0, 2.0]})
    ranked = metrics.rank(frame)
    assert list(ranked["unit_id"]) == ["B", "c", "b", "a"]   # 'B' < 'a' in strcmp order, but it scores higher
    assert list(ranked["rank"]) == [1, 2, 3, 4]
    ev = metrics.evaluate({"q": {"a": 1}}, frame, ["recip_rank"])
    assert ev.per_query.loc["q", "recip_rank"] == 0.25


def test_uniform_and_ragged_runs_rank_the_same():
    rng = np.random.default_rng(1)
    rows = [(f"q{q}", f"u{rng.integers(0, 30)}_{i}", float(rng.integers(0, 3))) for q in range(20) for i in range(6)]
    uniform = pd.DataFrame(rows, columns=["query_id", "unit_id", "score"])
    shuffled = uniform.sample(frac=1.0, random_state=3).reset_index(drop=True)
    a, b = metrics.rank(uniform), metrics.rank(shuffled)
    pd.testing.assert_frame_equal(a, b)


def test_a_run_from_dicts_is_ranked_as_the_same_run_from_a_frame():
    """Dict runs keep their ids uncoded (string or not) and give the frame path's canonical ranking: ties by code point order, non-ASCII ids, integer ids, a query
    with no units; and ids UTF-8 cannot hold (a lone surrogate) still rank."""
    for run in ({"q2": {"b": 0.5, "a": 0.5, "é": 0.5, "Z": 0.1}, "q1": {"z": 1.0, "ä": 1.0}, "q0": {}},
                {"q1": {3: 0.5, 10: 0.5, 2: 0.9}},
                {}):
        rows = [(q, u, s) for q, d in run.items() for u, s in d.items()]
        frame = pd.DataFrame({"query_id": pd.Series([r[0] for r in rows], dtype=object),
                              "unit_id": pd.Series([r[1] for r in rows], dtype=object),
                              "score": np.array([r[2] for r in rows], dtype=np.float64)})
        from_dicts, from_frame = ranking.Run(run).frame(), ranking.Run(frame).frame()
        pd.testing.assert_frame_equal(from_dicts, from_frame)
    ranked = ranking.Run({"q": {"b": 0.5, "a": 0.5, "é": 0.5}}).frame()
    assert list(ranked["unit_id"]) == ["é", "b", "a"]
    odd = ranking.Run({"q": {"a\ud800": 0.2, "a": 0.2, "b": 0.3}})      # UTF-8 cannot hold a lone surrogate
    assert list(odd.unit_ids) == ["b", "a\ud800", "a"] and list(odd.scores) == [0.3, 0.2, 0.2]
    with pytest.raises(trec.TrecFormatError, match="query 'q' unit 'b' has a non-finite score nan"):
        ranking.Run({"q": {"a": 0.1, "b": float("nan")}})


def test_rank_of_agrees_with_the_canonical_ranking():
    """ranking.rank_of (one unit's place in a row of scores) is the place Run gives it, ties included."""
    import numpy as np

    from lookalike.eval import ranking

    rng = np.random.default_rng(3)
    for trial in range(50):
        n = int(rng.integers(1, 12))
        ids = np.array([f"u{j:02d}" for j in rng.permutation(n)], dtype=object)
        scores = rng.integers(0, 3, size=n).astype(float)           # many ties
        order = list(ranking.Run(pd.DataFrame({"query_id": "q", "unit_id": ids, "score": scores})).unit_ids)
        for i in range(n):
            assert ranking.rank_of(scores, ids, i) == order.index(ids[i]) + 1, trial
            j = int(rng.integers(n))
            assert ranking.ranks_above(scores[i], ids[i], scores[j], ids[j]) == (order.index(ids[i]) < order.index(ids[j]))


def test_tie_settled_counts_questions_a_tie_at_depth_k_decides():
    import pandas as pd

    from lookalike.eval.ranking import tie_settled

    run = pd.DataFrame({"query_id": ["q1"] * 4 + ["q2"] * 4, "unit_id": ["a", "b", "c", "d"] * 2,
                        "score": [3, 2, 2, 1, 3, 2, 1, 0]})
    # q1: b and c tie across depth 2, so whether b (or c) is in the top 2 is settled by unit id
    assert tie_settled(run, {"q1": {"b"}, "q2": {"b"}}, 2) == 1
    assert tie_settled(run, {"q1": "a", "q2": "a"}, 2) == 0          # above the tie
    assert tie_settled(run, {"q1": {"d", "c"}}, 2) == 1               # any relevant unit in the tie
    assert tie_settled(run, {"q1": {"b"}}, 3) == 0                    # both tied units fit in the top 3


def test_a_run_from_dicts_sorts_its_unit_ids_only_for_a_tie():
    """A run from dicts keeps its unit ids uncoded; they are sorted (strcmp) only when two scores of a
    query tie, and only the tied rows' ids when every query has the same length — and the order is
    the canonical one, the same as from a frame."""
    import pandas as pd

    from lookalike.eval import ranking

    calls = []
    real = ranking._factorize_sorted

    def spy(values):
        calls.append(list(values))
        return real(values)

    ranking._factorize_sorted = spy
    try:
        plain = ranking.Run({"q1": {"b": 0.3, "a": 0.2, "c": 0.1}, "q2": {"z": 1.0, "y": 2.0}})
        assert calls == [] and list(plain.frame()["unit_id"]) == ["b", "a", "c", "y", "z"]
        tied = {"q1": {"a": 0.5, "c": 0.5, "b": 0.5, "d": 0.9}, "q2": {"é": 1.0, "e": 1.0, "f": 0.0}}
        run = ranking.Run(tied)
        assert len(calls) == 1
        calls.clear()
        frame = pd.DataFrame([(q, u, s) for q, d in tied.items() for u, s in d.items()],
                             columns=["query_id", "unit_id", "score"])
        expected = ranking.Run(frame).frame()
        calls.clear()
        assert run.frame().equals(expected)
        assert list(run.frame()["unit_id"]) == ["d", "c", "b", "a", "é", "e", "f"]     # unit id descending
        # every query the same length (each row sorted on its own): only the tied row's ids are coded
        even = {"q1": {"a": 0.5, "c": 0.5, "b": 0.1}, "q2": {"x": 0.2, "w": 0.3, "v": 0.3}, "q3": {"m": 1.0, "n": 0.0, "o": 0.5}}
        calls.clear()
        assert list(ranking.Run(even).frame()["unit_id"]) == ["c", "a", "b", "w", "v", "x", "m", "o", "n"]
        assert sorted(sum(calls, [])) == ["a", "b", "c", "v", "w", "x"]
    finally:
        ranking._factorize_sorted = real
