"""Mined candidates: mining, incompleteness, selection rules on a hand-built pool, export round trip."""

import numpy as np
import pandas as pd
import pytest
from lookalike.analysis import mining

# One question, eight mined candidates r1..r8 (scores 8..1), the positive scored 10.
MINED = pd.DataFrame({"query_id": "q1", "unit_id": [f"r{i}" for i in range(1, 9)], "rank": range(1, 9),
                      "score": [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0], "positive_score": 10.0})
# The judge's budget covered the top 5.
BUDGET = pd.DataFrame({"query_id": "q1", "unit_id": ["r1", "r2", "r3", "r4", "r5"],
                       "label": ["sufficient", "supporting", "irrelevant", "irrelevant", "sufficient"]})
# For evaluation every candidate is judged.
ALL = pd.concat([BUDGET, pd.DataFrame({"query_id": "q1", "unit_id": ["r6", "r7", "r8"],
                                       "label": ["irrelevant", "irrelevant", "supporting"]})], ignore_index=True)


def test_mine_removes_gold_and_keeps_canonical_order():
    run = pd.DataFrame({"query_id": ["q"] * 5, "unit_id": ["a", "g", "b", "c", "d"], "score": [5, 9, 5, 3, 1.0]})
    m = mining.mine(run, {"q": {"g"}}, n=3)
    assert list(m["unit_id"]) == ["b", "a", "c"]          # tie at 5: unit id descending
    assert list(m["rank"]) == [1, 2, 3] and (m["positive_score"] == 9).all()
    m = mining.mine(run, {"q": {"zz"}}, n=2)
    assert np.isnan(m["positive_score"]).all() and len(m) == 2


def test_each_rule_on_a_known_pool():
    top = mining.select(MINED, "top-k", k=4)
    assert list(top["unit_id"]) == ["r1", "r2", "r3", "r4"] and not top["backfill"].any()
    judged = mining.select(MINED, "judged", k=4, judged_labels=BUDGET)
    assert list(judged["unit_id"]) == ["r3", "r4", "r8", "r7"]          # irrelevant first, then lowest-scored unjudged
    assert list(judged["backfill"]) == [False, False, True, True]
    perc = mining.select(MINED, "topk-percpos:0.75", k=4)                      # score < 7.5
    assert list(perc["unit_id"]) == ["r2", "r3", "r4", "r5"]
    win = mining.select(MINED, "window:2-3", k=4)
    assert sorted(win["unit_id"]) == ["r2", "r3"]                          # fewer than k in the window
    w1 = mining.select(MINED, "window:2-8", k=4, seed=1)
    assert len(w1) == 4 and w1["rank"].between(2, 8).all()
    assert w1.equals(mining.select(MINED, "window:2-8", k=4, seed=1))          # seeded
    with pytest.raises(ValueError, match="unknown selection rule"):
        mining.select(MINED, "best", k=4)


def test_rule_table_contamination_and_backfill_accounting():
    chosen = pd.concat([mining.select(MINED, "top-k", k=4), mining.select(MINED, "judged", k=4, judged_labels=BUDGET)])
    t = mining.rule_table(chosen, ALL, n_boot=100).set_index("rule")
    assert t.loc["top-k", "contamination"] == 0.5                         # r1 sufficient, r2 supporting
    assert t.loc["judged", "contamination"] == 0.25                        # r8 (back-filled) is supporting
    assert t.loc["judged", "backfill_share"] == 0.5 and t.loc["top-k", "backfill_share"] == 0.0
    assert t.loc["top-k", "median_rank"] == 2.5 and t.loc["judged", "n_negatives"] == 4
    with pytest.raises(ValueError, match="has no label"):
        mining.rule_table(chosen, BUDGET)


def test_incompleteness_by_hand():
    mined = pd.concat([MINED, MINED.assign(query_id="q2")], ignore_index=True)
    labels = pd.concat([ALL, ALL.assign(query_id="q2", label="irrelevant")], ignore_index=True)
    t = mining.incompleteness(mined, labels, groups={"q1": "specific", "q2": "broad"}, n_boot=200).set_index("group")
    assert t.loc["all", "relevant_in_top4"] == 1.0                          # (2 + 0) / 2
    assert t.loc["all", "top1_relevant"] == 0.5
    assert t.loc["specific", "relevant_in_top4"] == 2.0 and t.loc["broad", "top1_relevant"] == 0.0
    assert t.loc["all", "n_queries"] == 2


def test_score_shape():
    s = mining.score_shape(pd.Series([0, 100, 95, 50, 0, 0.0]), pd.Series(["a", "a", "a", "b", "c", "c"]))
    assert s["share_at_ends"] == pytest.approx(5 / 6) and s["constant_questions"] == 2 and s["questions"] == 3


def test_export_round_trips_and_colpali_engine_reads_it(tmp_path):
    chosen = mining.select(MINED, "judged", k=4, judged_labels=BUDGET)
    units = pd.DataFrame({"unit_id": ["g"] + [f"r{i}" for i in range(1, 9)],
                          "image_path": [f"img/{u}.png" for u in ["g"] + [f"r{i}" for i in range(1, 9)]]})
    questions = pd.DataFrame({"query_id": ["q1"], "text": ["What was revenue in Q2?"]})
    files = mining.export_training(chosen, questions, {"q1": ["g"]}, ALL, units, tmp_path)
    rows = mining.read_training(tmp_path / "negatives_judged.jsonl")
    assert rows == [{"query_id": "q1", "query": "What was revenue in Q2?", "pos_target": ["g"],
                     "neg_target": ["r3", "r4", "r7", "r8"], "rule": "judged",
                     "neg_labels": ["irrelevant", "irrelevant", "irrelevant", "supporting"],
                     "neg_backfill": [False, False, True, True]}]
    pq = pd.read_parquet(tmp_path / "negatives_judged.parquet")
    assert list(pq["neg_target"].iloc[0]) == rows[0]["neg_target"] and pq["query"].iloc[0] == rows[0]["query"]
    assert (tmp_path / "corpus.jsonl") in files
    # the mapping the README documents: colpali-engine's own dataset classes read the files as written
    from colpali_engine.data.dataset import ColPaliEngineDataset, Corpus

    corpus_rows = mining.read_training(tmp_path / "corpus.jsonl")
    corpus = Corpus(corpus_rows, docid_to_idx_mapping={r["unit_id"]: i for i, r in enumerate(corpus_rows)})
    ds = ColPaliEngineDataset(rows, corpus=corpus, neg_target_column_name="neg_target", num_negatives=4)
    item = ds[0]
    assert item["query"] == "What was revenue in Q2?" and item["pos_target"] == ["img/g.png"]
    assert sorted(item["neg_target"]) == ["img/r3.png", "img/r4.png", "img/r7.png", "img/r8.png"]


def test_the_judged_rule_is_measured_by_a_judge_that_did_not_choose_it():
    import pandas as pd
    from lookalike.analysis import mining
    row = dict(n_queries=10, n_negatives=40, backfill_share=0.0, median_rank=3.0)
    table = pd.DataFrame([
        {"rule": "top-k", "judge": "reference", "contamination": 0.4, "contamination_lo": 0.3, "contamination_hi": 0.5,
         "sufficient_share": 0.2, **row},
        {"rule": "judged", "judge": "reference", "contamination": 0.0, "contamination_lo": 0.0, "contamination_hi": 0.0,
         "sufficient_share": 0.0, **row},
        {"rule": "judged", "judge": "answer-string", "contamination": 0.15, "contamination_lo": 0.1,
         "contamination_hi": 0.2, "sufficient_share": 0.1, **row}])
    got = mining.independent_rules(table, "reference", "answer-string").set_index("rule")
    assert got.loc["judged", "contamination"] == 0.15 and got.loc["judged", "measured_by"] == "answer-string"
    assert got.loc["top-k", "measured_by"] == "reference" and got.loc["top-k", "contamination"] == 0.4
    alone = mining.independent_rules(table, "reference").set_index("rule")
    assert alone.loc["judged", "measured_by"] == "none" and alone.loc["judged", "contamination"] != alone.loc[
        "judged", "contamination"]                                # NaN: 0 by construction is never reported


def test_incompleteness_and_contamination_intervals_resample_documents():
    """Twelve questions from three documents, answers alike within a document: resampling
    questions one by one pretends to twelve independent draws; resampling documents knows there are
    three, and its interval is wider (the old tables resampled questions only)."""
    qs = [f"q{i}" for i in range(12)]
    doc = pd.Series({q: f"d{i // 4}" for i, q in enumerate(qs)}, name="document")
    rel = {f"d{j}": lab for j, lab in enumerate(["sufficient", "irrelevant", "irrelevant"])}
    mined = pd.DataFrame({"query_id": np.repeat(qs, 4), "unit_id": [f"u{i}" for i in range(48)],
                          "rank": np.tile(range(1, 5), 12), "score": 1.0, "positive_score": 2.0})
    labels = mined[["query_id", "unit_id"]].assign(label=[rel[doc[q]] for q in mined["query_id"]])
    plain = mining.incompleteness(mined, labels, seed=1).iloc[0]
    by_doc = mining.incompleteness(mined, labels, seed=1, clusters=doc).iloc[0]
    assert plain["relevant_in_top4"] == by_doc["relevant_in_top4"] == pytest.approx(4 / 3)
    assert (by_doc["relevant_in_top4_hi"] - by_doc["relevant_in_top4_lo"]) > (
        plain["relevant_in_top4_hi"] - plain["relevant_in_top4_lo"])
    assert by_doc["interval"] == "bootstrap 95%, documents resampled"
    chosen = mining.select(mined, "top-k", k=4)
    wide = mining.rule_table(chosen, labels, seed=1, clusters=doc).iloc[0]
    narrow = mining.rule_table(chosen, labels, seed=1).iloc[0]
    assert wide["contamination_hi"] - wide["contamination_lo"] > narrow["contamination_hi"] - narrow["contamination_lo"]
