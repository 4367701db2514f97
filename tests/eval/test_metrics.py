"""Hand-checkable fixtures, properties and bad input for lookalike.metrics / trec / stats."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lookalike.eval import metrics
from lookalike.eval import ranking
from lookalike.eval import stats, trec

# A query with 3 relevant units (grades 2, 1, 1), one judged non-relevant, and a ranking of 5.
QRELS = {"q1": {"a": 2, "b": 1, "c": 1, "d": 0}, "q2": {"x": 1}}
RUN = {"q1": {"a": 0.9, "d": 0.8, "b": 0.7, "e": 0.6, "f": 0.5}, "q2": {"y": 1.0, "x": 0.5}}


def test_hand_computed_values():
    ev = metrics.evaluate(QRELS, RUN, ["P_2", "recall_5", "recip_rank", "map", "success_1", "top1", "Rprec",
                                 "recall_all_3", "recall_all_5", "num_rel", "num_ret"])
    q1 = ev.per_query.loc["q1"]
    assert q1["P_2"] == 0.5                          # a relevant, d not
    assert q1["recall_5"] == pytest.approx(2 / 3)    # c never retrieved
    assert q1["recip_rank"] == 1.0
    assert q1["map"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert q1["success_1"] == q1["top1"] == 1.0
    assert q1["Rprec"] == pytest.approx(2 / 3)
    assert q1["recall_all_5"] == 0.0                 # evidence incomplete: c is missing
    assert (q1["num_rel"], q1["num_ret"]) == (3, 5)
    q2 = ev.per_query.loc["q2"]
    assert q2["recip_rank"] == 0.5 and q2["top1"] == 0.0
    assert q2["recall_all_3"] == 1.0


def test_ndcg_by_hand():
    ev = metrics.evaluate(QRELS, RUN, ["ndcg_cut_3", "ndcg_exp_cut_3", "ndcg_all_3"])
    dcg = 2 / math.log2(2) + 0 + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ev.per_query.loc["q1", "ndcg_cut_3"] == pytest.approx(dcg / idcg)
    dcg_e = 3 / math.log2(2) + 1 / math.log2(4)
    idcg_e = 3 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ev.per_query.loc["q1", "ndcg_exp_cut_3"] == pytest.approx(dcg_e / idcg_e)
    assert ev.per_query.loc["q1", "ndcg_all_3"] == 0.0     # c is not in the top 3


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


def test_three_way_labels_and_sufficiency():
    labels = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2", "q3"],
                           "unit_id": ["s", "p", "i", "p2", "i2", "i3"],
                           "label": ["sufficient", "supporting", "irrelevant", "supporting", "irrelevant", "irrelevant"]})
    run = {"q1": {"p": 3.0, "i": 2.0, "s": 1.0}, "q2": {"i2": 2.0, "p2": 1.0}, "q3": {"x": 1.0, "i3": 0.5}}
    names = ["sufficient_1", "supporting_only_1", "neither_1", "sufficient_3", "supporting_only_3", "neither_3",
             "judged_1", "judged_2"]
    ev = metrics.evaluate(labels, run, names)
    pq = ev.per_query
    assert list(pq.loc["q1", names[:6]]) == [0, 1, 0, 1, 0, 0]
    assert list(pq.loc["q2", names[:6]]) == [0, 0, 1, 0, 1, 0]
    assert list(pq.loc["q3", names[:6]]) == [0, 0, 1, 0, 0, 1]
    assert pq.loc["q3", "judged_1"] == 0.0 and pq.loc["q3", "judged_2"] == 0.5
    # a custom mapping is honoured
    grades = {"sufficient": 3, "supporting": 2, "irrelevant": 0}
    ev2 = metrics.evaluate(metrics.Qrels(labels, grades=grades), run, ["sufficient_3"], grades=grades)
    assert ev2.per_query["sufficient_3"].tolist() == [1.0, 0.0, 0.0]


def test_queries_outside_the_intersection_are_reported():
    ev = metrics.evaluate({"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 0}},
                    {"q1": {"a": 1.0}, "q9": {"a": 1.0}, "q3": {"a": 1.0}}, ["map"])
    assert list(ev.per_query.index) == ["q1", "q3"]
    assert ev.run_only_queries == ["q9"] and ev.missing_from_run == ["q2"] and ev.no_relevant_queries == ["q3"]
    assert ev.mean()["map"] == 0.5
    complete = metrics.evaluate({"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 0}}, {"q1": {"a": 1.0}}, ["map"], complete=True)
    assert list(complete.per_query.index) == ["q1", "q2", "q3"]
    assert complete.mean()["map"] == pytest.approx(1 / 3)


def test_query_with_only_negative_judgements_scores_zero():
    # trec_eval loops forever on this input; we score it as a query with no relevant unit.
    ev = metrics.evaluate({"q": {"a": -1, "b": -1}}, {"q": {"a": 1.0, "b": 0.5}}, ["map", "ndcg", "ndcg_cut_5", "bpref"])
    assert ev.per_query.loc["q"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert ev.no_relevant_queries == ["q"]


def test_macro_and_micro_aggregation():
    pq = pd.DataFrame({"m": [1.0, 0.0, 0.0, 0.0]}, index=pd.Index(["a", "b", "c", "d"], name="query_id"))
    table = metrics.aggregate(pq, {"a": "x", "b": "y", "c": "y", "d": "y"}, ["m"], name="structure")
    micro = table[table["aggregate"] == "micro"].iloc[0]
    macro = table[table["aggregate"] == "macro"].iloc[0]
    assert micro["value"] == 0.25 and micro["n"] == 4
    assert macro["value"] == 0.5 and macro["n"] == 2
    sizes = table[table["aggregate"] == "group"].set_index("structure")["n"].to_dict()
    assert sizes == {"x": 1, "y": 3}
    with pytest.raises(ValueError, match="no group for queries"):
        metrics.aggregate(pq, {"a": "x"}, ["m"])


def test_parse_measures_accepts_trec_eval_forms():
    assert metrics.parse_measures(["P.5,10", "ndcg_cut.10", "map", "P_5"]) == ["P_5", "P_10", "ndcg_cut_10", "map"]
    assert metrics.parse_measures(["ndcg_cut.23.4"]) == ["ndcg_cut_23"]
    assert metrics.parse_measures(["iprec_at_recall.0,.5"]) == ["iprec_at_recall_0.00", "iprec_at_recall_0.50"]
    with pytest.raises(metrics.MeasureError, match="unknown measure 'ndgc_cut_10'"):
        metrics.parse_measures(["ndgc_cut_10"])


# ----------------------------------------------------------------------------- properties

def _random_labelled(seed, n_queries=6):
    rng = np.random.default_rng(seed)
    units = [f"u{i}" for i in range(10)]
    qrels, run = {}, {}
    for q in range(n_queries):
        judged = rng.choice(10, size=rng.integers(1, 7), replace=False)
        qrels[f"q{q}"] = {units[j]: int(rng.integers(0, 3)) for j in judged}
        ret = rng.choice(10, size=rng.integers(1, 10), replace=False)
        run[f"q{q}"] = {units[j]: float(rng.integers(0, 4)) for j in ret}
    return qrels, run


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([1, 3, 5, 10]))
def test_properties(seed, k):
    qrels, run = _random_labelled(seed)
    names = [f"sufficient_{k}", f"supporting_only_{k}", f"neither_{k}", f"recall_all_{k}", f"recall_{k}",
             f"ndcg_all_{k}", f"ndcg_cut_{k}", f"judged_{k}", f"P_{k}"]
    pq = metrics.evaluate(qrels, run, names).per_query
    total = pq[f"sufficient_{k}"] + pq[f"supporting_only_{k}"] + pq[f"neither_{k}"]
    assert np.allclose(total, 1.0)
    assert (pq[f"recall_all_{k}"] <= pq[f"recall_{k}"] + 1e-12).all()
    assert (pq[f"ndcg_all_{k}"] <= pq[f"ndcg_cut_{k}"] + 1e-12).all()
    for col in names:
        assert ((pq[col] >= 0) & (pq[col] <= 1 + 1e-12)).all()
    # macro equals micro when every group has the same size
    groups = {q: f"g{i % 2}" for i, q in enumerate(sorted(pq.index))}
    table = metrics.aggregate(pq, groups, [f"P_{k}"])
    values = table.set_index("aggregate")["value"]
    assert values["macro"] == pytest.approx(values["micro"])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_input_forms_are_interchangeable(seed):
    qrels, run = _random_labelled(seed)
    a = metrics.evaluate(qrels, run, ["map", "ndcg_cut_5", "P_3"]).per_query
    qf = pd.DataFrame([(q, u, r) for q, d in qrels.items() for u, r in d.items()],
                      columns=["query_id", "unit_id", "relevance"])
    rf = pd.DataFrame([(q, u, s) for q, d in run.items() for u, s in d.items()],
                      columns=["query_id", "unit_id", "score"])
    b = metrics.evaluate(qf, rf.iloc[::-1], ["map", "ndcg_cut_5", "P_3"]).per_query
    pd.testing.assert_frame_equal(a, b)
    assert trec.qrels_dict(qf) == qrels and trec.run_dict(rf) == run


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


# ----------------------------------------------------------------------------- I/O and bad input

def test_trec_files_round_trip(tmp_path):
    trec.write_qrels(QRELS, tmp_path / "q.txt")
    ranking.write_run(RUN, tmp_path / "r.txt", tag="sys")
    assert trec.qrels_dict(trec.read_qrels_file(tmp_path / "q.txt")) == QRELS
    frame, tag = trec.read_run_file(tmp_path / "r.txt")
    assert tag == "sys" and trec.run_dict(frame) == RUN
    lines = (tmp_path / "r.txt").read_text().splitlines()
    assert lines[0] == "q1 Q0 a 1 0.9 sys"


@pytest.mark.parametrize("content, message", [
    ("q1 Q0 a 1 0.5 run\nq1 Q0 a 2 0.4 run\n", r"r.txt:2: unit 'a' listed twice for query 'q1' \(first on line 1\)"),
    ("q1 Q0 a 1 nan run\n", r"r.txt:1: score 'nan' is not finite"),
    ("q1 Q0 a 1 inf run\n", r"r.txt:1: score 'inf' is not finite"),
    ("q1 Q0 a 1 high run\n", r"r.txt:1: score 'high' is not a number"),
    ("q1 Q0 a 1\n", r"r.txt:1: expected 6 fields"),
    ("# only a comment\n\n", r"r.txt: empty file"),
])
def test_bad_run_files(tmp_path, content, message):
    (tmp_path / "r.txt").write_text(content)
    with pytest.raises(trec.TrecFormatError, match=message):
        trec.read_run_file(tmp_path / "r.txt")


@pytest.mark.parametrize("content, message", [
    ("q1 0 a 1.5\n", r"q.txt:1: relevance '1.5' is not an integer"),
    ("q1 0 a 1\nq1 0 a 0\n", r"q.txt:2: unit 'a' judged twice for query 'q1'"),
    ("q1 0 a\n", r"q.txt:1: expected 4 fields"),
    ("", r"q.txt: empty file"),
])
def test_bad_qrels_files(tmp_path, content, message):
    (tmp_path / "q.txt").write_text(content)
    with pytest.raises(trec.TrecFormatError, match=message):
        trec.read_qrels_file(tmp_path / "q.txt")


def test_bad_frames():
    with pytest.raises(trec.TrecFormatError, match="row 1 lists unit 'a' twice"):
        metrics.Run(pd.DataFrame({"query_id": ["q", "q"], "unit_id": ["a", "a"], "score": [1.0, 2.0]}))
    with pytest.raises(trec.TrecFormatError, match="non-finite score"):
        metrics.Run({"q": {"a": float("nan")}})
    with pytest.raises(trec.TrecFormatError, match="label 'maybe' is not one of"):
        metrics.Qrels(pd.DataFrame({"query_id": ["q"], "unit_id": ["a"], "label": ["maybe"]}))
    with pytest.raises(trec.TrecFormatError, match="relevance 0.5 of unit 'a' is not an integer"):
        metrics.Qrels({"q": {"a": 0.5}})


def test_comments_and_hash_inside_ids(tmp_path):
    (tmp_path / "q.txt").write_text("# header comment\nq1 0 doc#1 1\n  # indented comment\nq1 0 doc2 0\n")
    frame = trec.read_qrels_file(tmp_path / "q.txt")
    assert list(frame["unit_id"]) == ["doc#1", "doc2"]


# ----------------------------------------------------------------------------- statistics

def test_bootstrap_is_seeded_and_covers_the_mean():
    values = np.r_[np.ones(30), np.zeros(70)]
    a = stats.bootstrap_ci(values, 1000, rng=5)
    b = stats.bootstrap_ci(values, 1000, rng=5)
    assert a == b and a.lo < 0.3 < a.hi and a.n == 100
    se = stats.proportion_se(0.3, 100)
    assert se == pytest.approx(math.sqrt(0.21 / 100))
    wilson = stats.proportion_ci(30, 100)
    assert (wilson.lo, wilson.hi) == pytest.approx((0.2189, 0.3958), abs=1e-4)       # the textbook Wilson values
    assert (a.hi - a.lo) == pytest.approx(wilson.hi - wilson.lo, rel=0.2)   # bootstrap and analytic agree roughly


@pytest.mark.parametrize("k, n", [(0, 12), (12, 12), (0, 1), (1, 1)])
def test_proportion_intervals_are_never_zero_width_at_0_or_1(k, n):
    ci = stats.proportion_ci(k, n)
    assert ci.hi - ci.lo > 0.1 and ci.lo <= ci.estimate <= ci.hi and ci.method == "Wilson"
    assert (ci.lo == 0.0) if k == 0 else (ci.hi == 1.0)


def test_cluster_bootstrap_is_wider_for_correlated_queries():
    rng = np.random.default_rng(0)
    clusters = np.repeat(np.arange(20), 10)
    values = np.repeat(rng.integers(0, 2, 20), 10).astype(float)     # every cluster all 0 or all 1
    plain = stats.bootstrap_ci(values, 2000, rng=1)
    clustered = stats.bootstrap_ci(values, 2000, rng=1, clusters=clusters)
    assert (clustered.hi - clustered.lo) > 2 * (plain.hi - plain.lo)


def test_paired_tests_detect_a_real_difference_and_not_a_null():
    rng = np.random.default_rng(7)
    a = rng.random(200)
    better = a + 0.1
    c = stats.compare(better, a, n_boot=1000, n_perm=2000, rng=3)
    assert c.delta == pytest.approx(0.1) and c.lo > 0 and c.p_randomisation < 0.01 and c.p_bootstrap < 0.01
    same = stats.compare(a, a[::-1].copy(), n_boot=1000, n_perm=2000, rng=3)
    assert same.p_randomisation > 0.05


def test_comparison_table_and_holm():
    idx = pd.Index([f"q{i}" for i in range(50)])
    base = pd.Series(np.linspace(0, 1, 50), index=idx)
    table = stats.comparison_table({"base": base, "plus": base + 0.2, "same": base.copy()}, baseline="base",
                                   n_boot=500, n_perm=1000)
    assert list(table["system"]) == ["base", "plus", "same"]
    assert table.loc[table["system"] == "plus", "delta"].iloc[0] == pytest.approx(0.2)
    assert math.isnan(table.loc[table["system"] == "base", "p_holm"].iloc[0])
    assert list(stats.holm([0.01, 0.04, 0.03])) == pytest.approx([0.03, 0.06, 0.06])


def test_pairwise_table_compares_every_pair_with_holm_over_the_pairs():
    """The baseline-only table cannot see that two non-baseline systems differ; the pairwise one does."""
    idx = pd.Index([f"q{i}" for i in range(60)])
    rng = np.random.default_rng(5)
    base = pd.Series(rng.random(60).round(), index=idx)
    low, high = (base * 0).where(rng.random(60) < 0.8, 1.0), (base * 0 + 1).where(rng.random(60) < 0.9, 0.0)
    per_query = {"base": base, "high": high, "low": low}
    pairs = stats.pairwise_table(per_query, n_boot=500, n_perm=2000, seed=1)
    assert len(pairs) == 3 and list(zip(pairs["system"], pairs["baseline"])) == [
        ("base", "high"), ("base", "low"), ("high", "low")]
    hl = pairs[(pairs["system"] == "high") & (pairs["baseline"] == "low")].iloc[0]
    assert hl["delta"] == pytest.approx(high.mean() - low.mean()) and hl["p_holm"] < 0.05
    assert list(pairs["p_holm"]) == pytest.approx(list(stats.holm(pairs["p_randomisation"].to_numpy())))
    more = stats.pairwise_table({**per_query, "zzz": base.copy()}, n_boot=500, n_perm=2000, seed=1)
    same = more[(more["system"] == "high") & (more["baseline"] == "low")].iloc[0]
    assert same["p_randomisation"] == hl["p_randomisation"]        # adding a system moves no pair's test


def test_the_randomisation_test_flips_whole_clusters():
    """Ten clusters of ten identical differences: flipping queries one by one pretends to 100
    independent questions and finds a tiny p; flipping clusters knows there are ten."""
    rng = np.random.default_rng(4)
    d = np.repeat(rng.normal(0.15, 0.3, 10), 10)
    plain = stats.randomisation_test(d, np.zeros_like(d), 4000, rng=1)
    clustered = stats.randomisation_test(d, np.zeros_like(d), 4000, rng=1, clusters=np.repeat(np.arange(10), 10))
    assert plain < 0.01 < clustered
    ids = np.arange(100)                              # one query per cluster is the unclustered test
    assert stats.randomisation_test(d, np.zeros_like(d), 4000, rng=1, clusters=ids) == plain


def test_adding_a_system_moves_no_other_systems_interval():
    import pandas as pd
    rng = np.random.default_rng(2)
    q = [f"q{i}" for i in range(40)]
    a, b, c = (pd.Series(rng.random(40), index=q) for _ in range(3))
    clusters = pd.Series([f"doc{i // 4}" for i in range(40)], index=q, name="document")
    two = stats.comparison_table({"a": a, "b": b}, baseline="a", seed=3, clusters=clusters).set_index("system")
    three = stats.comparison_table({"a": a, "aa": c, "b": b}, baseline="a", seed=3, clusters=clusters).set_index("system")
    assert two.loc["b", ["ci_lo", "ci_hi", "delta_lo", "delta_hi"]].tolist() == \
        three.loc["b", ["ci_lo", "ci_hi", "delta_lo", "delta_hi"]].tolist()
    assert set(three["cluster"]) == {"document"}
    zz = stats.comparison_table({"zz": b, "a": a}, baseline="a", seed=3, clusters=clusters).set_index("system")
    assert zz.loc["zz", "ci_lo"] == two.loc["b", "ci_lo"]        # the name (and its sort position) does not matter


def test_query_clusters_follow_the_gold_units_document_or_template():
    import pandas as pd
    units = pd.DataFrame({"unit_id": ["d1:1", "d1:2", "d2:1"], "doc_id": ["d1", "d1", "d2"],
                          "template_id": ["t", "u", "t"]})
    gold = {"q1": "d1:1", "q2": "d1:2;d2:1", "q3": "d2:1"}
    assert stats.query_clusters(gold, units, "document").tolist() == ["d1", "d1", "d2"]
    assert stats.query_clusters(gold, units, "template").tolist() == ["t", "u", "t"]
    assert stats.query_clusters(gold, units, "none") is None
    with pytest.raises(ValueError, match="stats.cluster must be one of document, template, none"):
        stats.query_clusters(gold, units, "page")


def test_sample_size_planner_from_a_paired_interval():
    """SE from the CI, the CI's half-width as the resolvable difference, and the n that 80% power needs."""
    plan = stats.sample_size(delta=0.1, lo=0.0, hi=0.2, n=50)
    se = 0.2 / (2 * 1.959964)
    assert plan["se"] == pytest.approx(se, rel=1e-4) and plan["resolvable"] == pytest.approx(0.1, rel=1e-4)
    assert plan["n_needed"] == math.ceil(50 * ((1.959964 + 0.841621) * se / 0.1) ** 2)   # about 102
    half = stats.sample_size(delta=0.2, lo=0.1, hi=0.3, n=50)
    assert half["n_needed"] < plan["n_needed"] / 3                       # twice the difference, a quarter of the n
    assert stats.sample_size(0.0, -0.1, 0.1, 50)["n_needed"] == math.inf


def test_a_run_over_exactly_the_judged_queries_scores_as_through_the_alignment():
    """evaluate skips aligning query ids when the run holds exactly the judged queries; the values
    must be those the alignment gives (reached here by one run-only query more)."""
    rng = np.random.default_rng(11)
    qrels = {f"q{i:02d}": {f"d{j}": int(rng.integers(0, 3)) for j in rng.choice(30, 6, replace=False)}
             for i in range(40)}
    run = {q: {f"d{j}": float(rng.random()) for j in rng.choice(30, 12, replace=False)} for q in qrels}
    names = ["P_5", "recall_10", "recip_rank", "map", "ndcg_cut_10", "ndcg"]
    fast = metrics.evaluate(qrels, run, names)
    aligned = metrics.evaluate(qrels, {**run, "zz-run-only": {"d1": 1.0}}, names)
    assert aligned.run_only_queries == ["zz-run-only"] and fast.run_only_queries == []
    pd.testing.assert_frame_equal(fast.per_query, aligned.per_query)
    complete = metrics.evaluate({**qrels, "zz-judged-only": {"d1": 1}}, run, names, complete=True)
    pd.testing.assert_frame_equal(fast.per_query, complete.per_query.drop(index="zz-judged-only"))


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


def test_a_run_from_dicts_joins_judgements_by_id_even_when_hashes_collide(monkeypatch):
    """The join of a run from dicts confirms every hash match on the unit id itself: ids that share a
    hash are never taken for one another, and two judgements that share a key fall back to the coded
    join; the values equal those of the same run given as a frame."""
    from lookalike.eval import metrics, ranking

    monkeypatch.setattr(ranking, "unit_hash", len)          # every one-letter id collides with every other
    run = {"q1": {"a": 0.9, "b": 0.8, "c": 0.7}, "q2": {"d": 0.5, "a": 0.4, "xy": 0.3}}
    qrels = {"q1": {"c": 1, "zz": 1}, "q2": {"b": 2, "xy": 1}}
    frame = pd.DataFrame([(q, u, s) for q, r in run.items() for u, s in r.items()],
                         columns=["query_id", "unit_id", "score"])
    names = ["map", "recip_rank", "ndcg", "P_5", "num_rel_ret"]
    R, Q = ranking.Run(run), ranking.Qrels(qrels)
    assert R.unit_hashes is not None
    got = metrics.evaluate(qrels, run, names).per_query
    want = metrics.evaluate(qrels, frame, names).per_query
    pd.testing.assert_frame_equal(got, want)
    assert got.loc["q1", "recip_rank"] == 1 / 3 and got.loc["q2", "recip_rank"] == 1 / 3
    # the ranks come from the hashed join itself (one-letter "a", "b", "d" all collide with "b" of q2)
    jq = np.repeat(np.arange(2), np.diff(Q.offsets))
    assert list(metrics._judged_ranks_hashed(R, jq, Q.unit_ids)) == [3, 0, 0, 3]
    # two judgements of one query sharing a key ("c" and "d" collide): the coded join decides
    assert metrics._judged_ranks_hashed(R, np.zeros(2, dtype=np.int64), np.array(["c", "d"], dtype=object)) is None
    clash = {"q1": {"c": 1, "d": 1}}
    pd.testing.assert_frame_equal(metrics.evaluate(clash, run, names).per_query,
                                  metrics.evaluate(clash, frame.iloc[:3], names).per_query)
