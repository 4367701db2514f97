"""Stage 07's tables on hand-built runs whose right answers are known."""

import numpy as np
import pandas as pd
import pytest
from lookalike.analysis import scoring
from lookalike.retrieval import fusion


def run(rows):
    return pd.DataFrame(rows, columns=["query_id", "unit_id", "score"])


QRELS = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2", "q3"], "unit_id": ["a", "b", "c", "d", "e"],
                      "relevance": [2, 1, 1, 0, 2]})


def test_sufficiency_shares_add_up_and_match_by_hand():
    r = run([("q1", "b", 3), ("q1", "a", 2), ("q2", "c", 5), ("q2", "d", 4), ("q3", "x", 9), ("q3", "y", 8)])
    table, frames = scoring.sufficiency(QRELS, {"sys": r}, ["q1", "q2", "q3"], "hard", ks=(1, 2), n_boot=200)
    t = table.set_index("k")
    # k=1: q1 supporting only (b), q2 supporting only (c), q3 neither
    assert t.loc[1, "sufficient"] == 0 and t.loc[1, "supporting_only"] == pytest.approx(2 / 3)
    # k=2: q1 has a (sufficient); q2 still supporting only; q3 neither
    assert t.loc[2, "sufficient"] == pytest.approx(1 / 3) and t.loc[2, "neither"] == pytest.approx(1 / 3)
    assert np.allclose(table[["sufficient", "supporting_only", "neither"]].sum(axis=1), 1.0)
    assert (table["n"] == 3).all()
    # what the shares rest on: q1 and q2's top 2 are labelled, q3's (x, y) are not
    assert t.loc[2, "judged"] == pytest.approx(2 / 3) and t.loc[1, "judged"] == pytest.approx(2 / 3)
    g = scoring.slot_gain(frames["sys"], "sufficient_1", "sufficient_2", n_boot=200)
    assert g["gain"] == pytest.approx(1 / 3) and g["n"] == 3


def test_a_question_missing_from_the_run_counts_as_neither():
    table, _ = scoring.sufficiency(QRELS, {"sys": run([("q1", "a", 1.0)])}, ["q1", "q3"], "corpus", ks=(1,), n_boot=50)
    assert table.loc[0, "n"] == 2 and table.loc[0, "sufficient"] == 0.5 and table.loc[0, "neither"] == 0.5


def test_restricted_run_keeps_only_candidates_with_their_scores():
    scores = np.array([[0.1, 0.9, 0.5], [0.3, 0.2, 0.7]])
    r = scoring.restricted_run(scores, ["q1", "q2"], ["a", "b", "c"], {"q1": ["c", "a"], "q2": ["b"]})
    assert list(zip(r["query_id"], r["unit_id"], r["score"])) == [("q1", "a", 0.1), ("q1", "c", 0.5), ("q2", "b", 0.2)]


def test_a_candidate_missing_from_the_scored_units_is_named_in_every_path():
    scores = np.array([[0.1, 0.9, 0.5], [0.3, 0.2, 0.7]])
    units = ["a", "b", "c"]
    with pytest.raises(KeyError, match="'zz'"):
        scoring.restricted_run(scores, ["q1", "q2"], units, {"q1": ["a", "zz"], "q2": ["b"]})
    with pytest.raises(KeyError, match="'zz'"):
        scoring.restricted_run(scores, ["q1", "q2"], units, scoring.SharedCandidates(["a", "zz"], {"q1": [], "q2": []}), 2)
    with pytest.raises(KeyError, match="'zz'"):
        scoring.restricted_run(scores, ["q1", "q2"], units, scoring.SharedCandidates(["a"], {"q1": ["zz"], "q2": []}), 2)


def test_evidence_complete_macro_and_micro():
    qrels = pd.DataFrame({"query_id": ["s1", "s2", "m1", "m1"], "unit_id": ["a", "b", "c", "d"], "relevance": [1] * 4})
    questions = pd.DataFrame({"query_id": ["s1", "s2", "m1"],
                              "evidence_structure": ["page-single", "page-single", "doc-far"]})
    r = run([("s1", "a", 2), ("s2", "x", 2), ("s2", "b", 1), ("m1", "c", 3), ("m1", "x", 2), ("m1", "y", 1),
             ("m1", "d", 0.5)])
    table, _ = scoring.evidence_complete(qrels, {"sys": r}, questions, ks=(3,))
    t = table.set_index(["aggregate", "evidence_structure", "measure"])["value"]
    # RecallAll@3: s1 1, s2 1, m1 0 (d is at rank 4); Recall@3: m1 0.5
    assert t[("structure", "page-single", "RecallAll")] == 1.0 and t[("structure", "doc-far", "RecallAll")] == 0.0
    assert t[("micro", "all", "RecallAll")] == pytest.approx(2 / 3)
    assert t[("macro", "all", "RecallAll")] == pytest.approx(0.5)          # structures count once each
    assert t[("structure", "doc-far", "Recall")] == 0.5
    assert t[("micro", "all", "nDCGAll")] <= t[("micro", "all", "nDCG")]


def test_fusion_trace_counts_what_the_fused_top_k_dropped():
    a = run([("q1", "good", 1.0)] + [("q1", f"a{i}", 2.0 + i) for i in range(3)])     # good at rank 4 of a
    b = run([("q1", f"b{i}", 2.0 + i) for i in range(3)] + [("q1", "z", 0.1)])
    fused = {"rrf": fusion.fuse("rrf", [a, b]), "round-robin": fusion.fuse("round-robin", [a, b])}
    per_q, counts = scoring.fusion_trace({"a": a, "b": b}, fused, {"q1": {"good"}}, k=3)
    c = counts.set_index(["method", "component"])["questions_lost"]
    assert c[("rrf", "a")] == 1 and c[("rrf", "b")] == 0 and c[("rrf", "any")] == 1
    per = per_q.set_index("method")
    assert per.loc["rrf", "in_some_pool"] and not per.loc["rrf", "in_fused_top_k"]
    # with k large enough nothing is lost
    _, counts = scoring.fusion_trace({"a": a, "b": b}, fused, {"q1": {"good"}}, k=10)
    assert (counts["questions_lost"] == 0).all()
    with pytest.raises(ValueError, match="unknown fusion method"):
        fusion.fuse("max", [a, b])


def test_restrict_ranking_puts_unranked_candidates_last():
    r = run([("q", "a", 0.5), ("q", "b", 0.9), ("q", "x", 0.7)])
    out = scoring.restrict_ranking(r, {"q": ["a", "b", "c"], "z": ["a"]})
    got = dict(zip(zip(out["query_id"], out["unit_id"]), out["score"]))
    assert got[("q", "b")] == 0.9 and got[("q", "a")] == 0.5 and got[("q", "c")] < 0.5
    assert ("q", "x") not in got and got[("z", "a")] == -1.0


def test_macro_figures_state_each_structures_n_and_warn_when_one_is_thin():
    import pandas as pd
    from lookalike.analysis import scoring
    rows = [{"system": "a", "aggregate": "structure", "evidence_structure": st, "measure": "Recall", "k": 10,
             "value": 0.5, "n": n} for st, n in (("page-single", 49), ("page-multi", 1))]
    said = scoring.macro_weights(pd.DataFrame(rows))
    assert "page-multi n = 1, page-single n = 49" in said and "Micro averages all 50" in said
    assert "Caution: page-multi (1) has fewer than 10 questions" in said
    one = scoring.macro_weights(pd.DataFrame(rows[:1]))
    # seen on a photo shape: "Macro averages 1 evidence structures" — one structure is not an average of several
    assert "Caution" not in one and "averages 1" not in one
    assert one.startswith("Macro and Micro are the same figure here") and "page-single (n = 49)" in one


def test_evidence_complete_states_an_interval_for_every_figure():
    rng = np.random.default_rng(2)
    qids = [f"q{i}" for i in range(40)]
    qrels = pd.DataFrame({"query_id": qids, "unit_id": [f"u{i}" for i in range(40)], "relevance": 1})
    questions = pd.DataFrame({"query_id": qids, "evidence_structure": ["page-single"] * 30 + ["doc-far"] * 10})
    rows = [(q, f"u{i}" if rng.random() < 0.6 else "x", 2.0) for i, q in enumerate(qids)]
    table, _ = scoring.evidence_complete(qrels, {"sys": run(rows)}, questions, ks=(3,))
    assert table[["value_lo", "value_hi"]].notna().all().all()
    assert (table["value_lo"] <= table["value"] + 1e-12).all() and (table["value"] <= table["value_hi"] + 1e-12).all()
    t = table.set_index(["aggregate", "evidence_structure", "measure"])
    # the Macro interval rests on 10 doc-far questions weighing as much as 30 page-single ones: wider than Micro's
    width = lambda key: t.loc[key, "value_hi"] - t.loc[key, "value_lo"]  # noqa: E731
    assert width(("macro", "all", "Recall")) > width(("micro", "all", "Recall"))


def _tied_scores(rng, nq, nu):
    # few distinct values: ties everywhere, at every cut
    return rng.integers(0, 4, size=(nq, nu)).astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_candidates_cut_at_depth_rank_as_the_full_restricted_run_cut(seed):
    rng = np.random.default_rng(seed)
    units = [f"u{i:03d}" for i in rng.permutation(120)]
    qids = [f"q{i}" for i in range(9)]
    scores = _tied_scores(rng, len(qids), len(units))
    shared = list(rng.choice(units, 40, replace=False))
    # q8 is not asked about; q7's extras repeat and overlap the shared list, and it has none of its own
    extra = {q: list(rng.choice(units, 6)) + shared[:2] for q in qids[:7]} | {"q7": []}
    cands = scoring.SharedCandidates(shared, extra)
    assert cands["q7"] == cands.shared and set(cands) == set(qids[:8])
    assert all(len(set(cands[q])) == len(cands[q]) for q in cands) and cands.sizes() == [len(cands[q]) for q in cands]
    plain = {q: cands[q] for q in cands}
    for depth in (1, 5, 10, 200):
        want = scoring.cut(scoring.restricted_run(scores, qids, units, plain), depth)
        got = scoring.restricted_run(scores, qids, units, cands, depth)
        pd.testing.assert_frame_equal(scoring.cut(got, depth), want)
        assert set(got["query_id"]) == set(qids[:8])


@pytest.mark.parametrize("seed", [0, 1])
def test_an_external_ranking_restricted_at_depth_is_the_full_restriction_cut(seed):
    rng = np.random.default_rng(seed)
    units = [f"u{i:02d}" for i in range(60)]
    ext = run([(q, u, float(rng.integers(0, 3))) for q in ("q1", "q2") for u in rng.choice(units, 12, replace=False)])
    cands = scoring.SharedCandidates(list(rng.choice(units, 25, replace=False)),
                               {"q1": list(rng.choice(units, 5)), "q2": [], "q3": ["u01"]})
    plain = {q: cands[q] for q in cands}
    for depth in (1, 4, 10, 40):
        want = scoring.cut(scoring.restrict_ranking(ext, plain), depth)
        for given in (cands, plain):
            pd.testing.assert_frame_equal(scoring.cut(scoring.restrict_ranking(ext, given, depth), depth), want)


def test_scoring_question_blocks_at_depth_gives_each_system_the_full_rankings_top(monkeypatch):
    from lookalike.retrieval import indexes, systems
    from lookalike.retrieval.encoders.base import Vectors

    rng = np.random.default_rng(5)
    unit_ids = [f"p{i:02d}" for i in range(50)]
    units = pd.DataFrame({"unit_id": unit_ids, "doc_id": [f"d{i // 5}" for i in range(50)]})
    words = ["tax", "rate", "fee", "sum", "net"]
    texts = [" ".join(rng.choice(words, 4)) for _ in unit_ids]
    questions = pd.DataFrame({"query_id": [f"q{i}" for i in range(7)],
                              "text": [" ".join(rng.choice(words, 2)) for _ in range(7)]})
    base = {"dense": Vectors("dense", "pixels", unit_ids, np.round(rng.normal(size=(50, 4)), 1).astype(np.float32)),
            "bm25": Vectors("bm25", "pixels", unit_ids, texts, kind="text")}
    qv = {"dense": Vectors("dense", "pixels", list(questions["query_id"]),
                           np.round(rng.normal(size=(7, 4)), 1).astype(np.float32)),
          "bm25": Vectors("bm25", "pixels", list(questions["query_id"]), list(questions["text"]), kind="text")}
    monkeypatch.setattr(systems, "encode_queries", lambda q, names, **kw: qv)
    scorer = scoring.CandidateSystems(units, base, fusions={"dense+bm25": ["dense", "bm25"]}, depth=10)
    sets = {"half": scoring.SharedCandidates(unit_ids[::2], {q: ["p01", "p03"] for q in questions["query_id"]})}
    full = scorer.runs_for(questions, sets)
    monkeypatch.setattr(indexes, "BLOCK_CELLS", 120)           # 2 questions a block: 4 blocks
    cut = scorer.runs_for(questions, sets, depth=10)
    for name in ("dense", "bm25"):
        pd.testing.assert_frame_equal(scoring.cut(cut["half"][name], 10), scoring.cut(full["half"][name], 10))
    pd.testing.assert_frame_equal(cut["half"]["dense+bm25"], full["half"]["dense+bm25"])
    with pytest.raises(ValueError, match="below the run depth"):
        scorer.runs_for(questions, sets, depth=5)


def test_scoring_question_blocks_without_depth_holds_no_question_by_unit_matrix(monkeypatch):
    """The candidate views (top-1 under random negatives, sufficiency) ask for every candidate, no depth:
    they too score a block of questions at a time. Scored all at once, 5,000 questions over 100,000 units
    held 2 GB per system (9.47 GiB at the peak of stage 07)."""
    from lookalike import memory
    from lookalike.retrieval import indexes, systems
    from lookalike.retrieval.encoders.base import Vectors

    rng = np.random.default_rng(11)
    unit_ids = [f"p{i:02d}" for i in range(40)]
    units = pd.DataFrame({"unit_id": unit_ids, "doc_id": [f"d{i // 4}" for i in range(40)]})
    words = ["tax", "rate", "fee", "sum", "net", "cash"]
    questions = pd.DataFrame({"query_id": [f"q{i}" for i in range(9)],
                              "text": [" ".join(rng.choice(words, 2)) for _ in range(9)]})
    qids = list(questions["query_id"])
    base = {"dense": Vectors("dense", "pixels", unit_ids, rng.normal(size=(40, 6)).astype(np.float32)),
            "bm25": Vectors("bm25", "pixels", unit_ids, [" ".join(rng.choice(words, 5)) for _ in unit_ids],
                            kind="text")}
    qv = {"dense": Vectors("dense", "pixels", qids, rng.normal(size=(9, 6)).astype(np.float32)),
          "bm25": Vectors("bm25", "pixels", qids, list(questions["text"]), kind="text")}
    monkeypatch.setattr(systems, "encode_queries", lambda q, names, **kw: qv)
    seen = []
    real = systems.scorer

    def counting(vectors):
        score = real(vectors)
        # each block is scored where its freed score blocks go back to the system (lookalike.memory)
        return lambda queries: seen.append(len(queries.ids) if memory._depth else -1) or score(queries)

    monkeypatch.setattr(systems, "scorer", counting)
    scorer = scoring.CandidateSystems(units, base, fusions={"dense+bm25": ["dense", "bm25"]}, depth=10)
    cands = {q: list(rng.choice(unit_ids, 6, replace=False)) for q in qids}
    whole = scorer.runs(questions, cands)
    assert max(seen) == 9                                       # 9 x 40 cells: one block holds them all
    seen.clear()
    monkeypatch.setattr(indexes, "BLOCK_CELLS", 2 * 40)         # 2 questions a block: 5 blocks
    blocked = scorer.runs(questions, cands)
    assert min(seen) == 1 and max(seen) == 2 and sum(seen) == 9 * len(base)
    assert set(blocked) == set(whole) == {"dense", "bm25", "dense+bm25"}
    for name in whole:
        pd.testing.assert_frame_equal(blocked[name], whole[name])
    assert len(whole["dense"]) == 9 * 6 and set(whole["dense"]["query_id"]) == set(qids)


def test_views_follow_the_exported_runs_tie_order_when_recomputed_scores_differ_in_the_last_bit(monkeypatch):
    """The audit failed untouched runs: where a system scores many units alike (photos whose OCR reads
    nothing), computing the same score again in another block shape moved it by a bit, the ties broke
    another way and the haystack's full-corpus point (and top-1, sufficiency) disagreed with the exported
    run. With the exported run given as the order, every view ranks as the exported run does."""
    from lookalike.eval import ranking
    from lookalike.retrieval import systems
    from lookalike.retrieval.encoders.base import Vectors

    rng = np.random.default_rng(3)
    unit_ids = [f"p{i:02d}" for i in range(30)]
    units = pd.DataFrame({"unit_id": unit_ids, "doc_id": unit_ids})
    qids = [f"q{i}" for i in range(4)]
    questions = pd.DataFrame({"query_id": qids, "text": ["x"] * 4})
    same = np.ones((30, 3), dtype=np.float32)                    # every unit alike: one long tie
    base = {"ocr": Vectors("ocr", "ocr-of-pixels", unit_ids, same)}
    qv = {"ocr": Vectors("ocr", "ocr-of-pixels", qids, np.ones((4, 3), dtype=np.float32))}
    monkeypatch.setattr(systems, "encode_queries", lambda q, names, **kw: qv)
    tie = np.full((4, 30), 0.5)
    # the exported run: the tie broken as trec_eval breaks it (unit id, descending), cut at 10
    exported = scoring.cut(run([(q, u, 0.5) for q in qids for u in unit_ids]), 10)
    # the same scores computed again, each a bit apart (as another BLAS path gives them)
    noisy = tie + rng.integers(-2, 3, size=tie.shape) * np.spacing(0.5)
    monkeypatch.setattr(systems, "scorer", lambda v: (lambda queries: noisy[[qids.index(q) for q in queries.ids]]))
    scorer = scoring.CandidateSystems(units, base, depth=10)
    whole = {q: unit_ids for q in qids}
    following = scorer.runs(questions, whole, order={"ocr": exported})["ocr"]
    pd.testing.assert_frame_equal(scoring.cut(following, 10)[["query_id", "unit_id"]],
                                  exported[["query_id", "unit_id"]])
    # a subsample keeps the exported order of the units it holds, then the others in their own order
    half = scoring.SharedCandidates(unit_ids[::2], {q: [] for q in qids})
    sub = scorer.runs_for(questions, {"half": half}, depth=10, order={"ocr": exported})["half"]["ocr"]
    want = [u for u in ranking.rank(exported).query("query_id == 'q0'")["unit_id"] if u in set(unit_ids[::2])]
    assert sub[sub["query_id"] == "q0"]["unit_id"].tolist()[:len(want)] == want
    # without the order the recomputed bits decide, and the full-corpus view is not the exported run
    free = scorer.runs(questions, whole)["ocr"]
    assert not scoring.cut(free, 10)[["query_id", "unit_id"]].equals(exported[["query_id", "unit_id"]])


def test_follow_exported_keeps_every_unexported_unit_below_the_exported_ones():
    scores = np.array([[0.9, 0.1, 0.5, 0.5], [0.2, 0.2, 0.2, 0.2]])
    q_at, u_at, v = np.array([0, 0]), np.array([2, 3]), np.array([0.5, 0.5])
    out = scoring.follow_exported(scores, range(0, 2), q_at, u_at, v)
    assert out[0, 2] == out[0, 3] == 0.5 and out[0, 0] < 0.5 and out[0, 1] == 0.1
    assert out[1].tolist() == [0.2] * 4                           # a question the run does not hold
    assert scores[0, 0] == 0.9                                     # the input is not changed
