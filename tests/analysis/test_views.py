"""The long-document views of a run's systems (analysis.views): settings that did not run say why and are
never filled in, Ctx and B+Ctx ranked from each family's vectors, RecallAll@5 per source and structure,
single beside multi vectors only when both kinds ran."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lookalike.analysis import views
from lookalike.retrieval import doc_context
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval.encoders.base import Vectors


def _evidence(system: str, value: float, n: int = 12) -> pd.DataFrame:
    return pd.DataFrame([(system, 10, m, agg, value, value - 0.1, value + 0.1, n)
                         for m in ("nDCGAll", "RecallAll") for agg in ("macro", "micro")],
                        columns=["system", "k", "measure", "aggregate", "value", "value_lo", "value_hi", "n"])


def test_a_setting_that_did_not_run_says_why_and_carries_no_value():
    ev = pd.concat([_evidence("fam", 0.5), _evidence("fam+doc-context", 0.6)], ignore_index=True)
    long = views.settings_table(["fam"], ev, pd.DataFrame(), {"fam": "a text (BM25) system has no vectors"},
                                named={"rerank": ["fam"]})
    status = long.groupby("setting")["status"].first()
    assert status["Base"] == status["B+Ctx"] == "ran"
    assert status["Ctx"] == "not run: a text (BM25) system has no vectors"
    assert status["Rerank"] == "not run: configured, but not built (stage 06 says why)"
    assert status["Q-Split"] == "not run: split.systems does not name it"
    assert long[long["status"] != "ran"]["value"].isna().all()
    wide = views.settings_wide(long).set_index("setting")
    assert wide.loc["Base", "nDCGAll@10 Macro"] == "0.50 [0.40, 0.60]" and wide.loc["Base", "n"] == 12
    assert wide.loc["Rerank", "nDCGAll@10 Macro"] == "—" and wide.loc["Rerank", "note"].startswith("not run")


def _dense(rng, ids, dim=6):
    data = rng.normal(size=(len(ids), dim)).astype(np.float32)
    return Vectors("fam", "pixels", list(ids), data / np.linalg.norm(data, axis=1, keepdims=True), "single")


def test_ctx_and_b_plus_ctx_are_ranked_from_the_familys_vectors_and_say_why_not_otherwise(monkeypatch):
    rng = np.random.default_rng(3)
    units = pd.DataFrame({"unit_id": [f"d{i // 3}:{i % 3 + 1}" for i in range(9)], "doc_id": [f"d{i // 3}" for i in range(9)]})
    unit_vectors = {"fam": _dense(rng, units["unit_id"]), "bm25": Vectors("bm25", "ocr", list(units["unit_id"]),
                                                                         ["x"] * 9, "text"),
                    "partial": _dense(rng, units["unit_id"][:5])}
    queries = {n: _dense(rng, ["q1", "q2", "q3"]) for n in ("fam", "partial")}
    monkeypatch.setattr(retrieve, "BLOCK_CELLS", 9 * 2)          # two questions a block: the blocks must join
    runs, why = views.context_runs(["fam", "bm25", "partial", "absent"], unit_vectors, queries, units,
                                   ["q1", "q2", "q3"], {}, depth=4, n_context=2)
    assert set(runs) == {"fam+ctx-only", "fam+doc-context"}
    assert why["bm25"].startswith("a text (BM25) system") and why["partial"].startswith("its index does not hold")
    assert why["absent"] == "no vectors of it in this run (it was not encoded)"     # not called a text system
    scorer = doc_context.ContextScorer(list(unit_vectors["fam"].data), units["doc_id"], n_context=2, seed=0)
    page, ctx = scorer.parts(list(queries["fam"].data))
    ids = list(units["unit_id"])
    pd.testing.assert_frame_equal(runs["fam+ctx-only"], retrieve.run_from_scores(ctx, ["q1", "q2", "q3"], ids, 4))
    pd.testing.assert_frame_equal(runs["fam+doc-context"],
                                  retrieve.run_from_scores(page + ctx, ["q1", "q2", "q3"], ids, 4))
    have = {"fam+doc-context": runs["fam+doc-context"].head(1)}
    again, _ = views.context_runs(["fam"], unit_vectors, queries, units, ["q1", "q2", "q3"], have, depth=4, n_context=2)
    assert again["fam+doc-context"] is have["fam+doc-context"]      # stage 06's run reused, not ranked again


def test_recall_all_at_5_per_source_and_structure_counts_each_cell():
    questions = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "evidence_unit_ids": ["u1;u2", "u3", "u9"],
                              "evidence_structure": ["page-multi", "page-single", "page-single"]})
    units = pd.DataFrame({"unit_id": ["u1", "u2", "u3"], "publisher": ["A", "B", ""]})
    frames = {"s": pd.DataFrame({"recall_all_5": [1.0, 0.0, 1.0]}, index=["q1", "q2", "q3"])}
    cells = views.source_structure(frames, questions, units, "publisher").set_index(["source", "evidence_structure"])
    assert cells.loc[("A", "page-multi"), "n"] == 1 and cells.loc[("A", "page-multi"), "recall_all_5"] == 1.0
    # an empty source and an evidence unit missing from the units table both read "(none)"
    assert cells.loc[("(none)", "page-single"), "n"] == 2
    assert cells.loc[("(none)", "page-single"), "recall_all_5"] == pytest.approx(0.5)
    with pytest.raises(KeyError):
        views.source_structure(frames, questions, units, "no_such_column")


def test_single_beside_multi_vectors_only_when_both_kinds_ran():
    rng = np.random.default_rng(0)
    single = _dense(rng, ["u1", "u2"])
    multi = Vectors("multi", "pixels", ["u1", "u2"], [rng.normal(size=(t, 4)).astype(np.float32) for t in (3, 5)], "multi")
    ev = pd.concat([_evidence("fam", 0.5), _evidence("multi", 0.7)], ignore_index=True)
    assert views.kinds_table({"fam": single}, ev).empty
    table = views.kinds_table({"fam": single, "multi": multi}, ev)
    m = table[table["system"] == "multi"].iloc[0]
    assert m["vectors_per_page"] == 4.0 and m["dim"] == 4 and m["bytes_per_page_fp32"] == 4 * 4 * 4
    assert set(table["system"]) == {"fam", "multi"} and len(table) == 8
