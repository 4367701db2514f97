"""Conformance: trec_eval's own expected outputs, gdeval's exponential-gain nDCG, pytrec_eval."""

import json
import shlex

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lookalike.eval import metrics

pytrec_eval = pytest.importorskip("pytrec_eval")


def _parse_expected(path):
    out = {}
    for line in path.read_text().splitlines():
        measure, qid, value = line.split("\t")
        out[(measure.strip(), qid)] = value
    return out


def _commands(shared_dir):
    """(options, qrels, run, expected) for each trec_eval command whose measures we compute."""
    cases = []
    for line in (shared_dir / "EXPECTED_COMMANDS.txt").read_text().splitlines():
        if not line.startswith("./trec_eval") or "-R" in line:
            continue           # preference / jg formats are other input formats, not measures we compute
        cmd, _, expected = line.partition("| diff - ")
        args = shlex.split(cmd)[1:]
        files = [a for a in args if a.startswith("test/")]
        opts = dict(level=1, complete=False, max_docs=None)
        for a in args:
            if a == "-c":
                opts["complete"] = True
            elif a.startswith("-l"):
                opts["level"] = int(a[2:])
            elif a.startswith("-M"):
                opts["max_docs"] = int(a[2:])
            elif a == "-Z" or a.startswith("test/zscores"):
                break
        if "-Z" in args:
            continue
        cases.append((opts, files[0][5:], files[1][5:], expected.strip()[5:]))
    return cases


@pytest.fixture(scope="module")
def trec_dir(request):
    from tests.conftest import SHARED_DATA

    d = SHARED_DATA / "trec_eval"
    if not d.is_dir():
        pytest.skip("../shared/data/trec_eval is absent")
    return d


@pytest.mark.shared_data
def test_trec_eval_expected_outputs_exact_at_4_decimals(trec_dir):
    cases = _commands(trec_dir)
    assert len(cases) >= 8
    checked = set()
    for opts, qrels, run, expected in cases:
        exp = _parse_expected(trec_dir / expected)
        names = []
        for measure, _ in exp:
            try:
                metrics.parse_measures([measure])
            except metrics.MeasureError:
                continue
            names.append(measure)
        names = list(dict.fromkeys(names))
        ev = metrics.evaluate(metrics.Qrels.read(trec_dir / qrels), metrics.Run.read(trec_dir / run), names, **opts)
        means = ev.mean()
        for (measure, qid), value in exp.items():
            if measure not in names:
                continue
            if measure in ev.text:            # relstring: text, per query only
                assert ev.text[measure][qid] == value, f"{expected} {measure} {qid}"
            else:
                got = means[measure] if qid == "all" else ev.per_query.loc[qid, measure]
                assert metrics.format_value(measure, got) == value, f"{expected} {measure} {qid}"
            checked.add(measure)
    # every trec_eval measure we implement was checked somewhere
    for must in ("map", "gm_map", "Rprec", "bpref", "recip_rank", "P_5", "recall_1000", "ndcg", "ndcg_cut_10",
                 "ndcg_cut_23", "success_1", "iprec_at_recall_0.25", "num_rel_ret", "map_cut_10", "relative_P_5",
                 "gm_bpref", "num_nonrel_judged_ret", "set_P", "set_relative_P", "set_recall", "set_map", "set_F",
                 "Rprec_mult_0.20", "Rprec_mult_0.35", "Rprec_mult_5.00", "utility", "11pt_avg", "rbp", "rbp_resid",
                 "unj_20", "infAP", "binG", "G", "ndcg_rel", "Rndcg", "relstring", "relstring_20"):
        assert must in checked


@pytest.mark.shared_data
def test_exponential_ndcg_reproduces_gdeval(shared_data):
    d = shared_data / "ir_measures"
    spec = json.loads((d / "expected.json").read_text())["gdeval"]
    ev = metrics.evaluate(metrics.Qrels.read(d / spec["qrels"]), metrics.Run.read(d / spec["run"]), ["ndcg_exp_cut_20", "ndcg_exp_cut_2"])
    for name, measure in (("nDCG@20", "ndcg_exp_cut_20"), ("nDCG@2", "ndcg_exp_cut_2")):
        for qid, value in spec[name]["per_query"].items():
            assert ev.per_query.loc[qid, measure] == pytest.approx(value, abs=5e-6)
        assert ev.mean()[measure] == pytest.approx(spec[name]["mean"], abs=5e-6)
    # and it is a different number from trec_eval's linear-gain nDCG on graded qrels
    lin = metrics.evaluate(metrics.Qrels.read(d / spec["qrels"]), metrics.Run.read(d / spec["run"]), ["ndcg_cut_20"])
    assert lin.per_query["ndcg_cut_20"].iloc[0] != pytest.approx(ev.per_query["ndcg_exp_cut_20"].iloc[0], abs=1e-3)


PYTREC_MEASURES = ["P_1", "P_3", "P_10", "recall_2", "recall_10", "map", "recip_rank", "ndcg", "ndcg_cut_3",
                   "ndcg_cut_10", "success_1", "success_5", "Rprec", "bpref", "num_ret", "num_rel", "num_rel_ret",
                   "iprec_at_recall_0.00", "iprec_at_recall_0.50", "iprec_at_recall_1.00"]


def _pytrec_names(names):
    """Our names -> pytrec_eval's parameterised measure strings ('P.1,3,10', 'iprec_at_recall.0,.5,1')."""
    cutoffs: dict[str, list[str]] = {}
    plain = set()
    for n in names:
        if n.startswith("iprec_at_recall_"):
            cutoffs.setdefault("iprec_at_recall", []).append(n.rsplit("_", 1)[1])
        elif n.rsplit("_", 1)[-1].isdigit() and n not in ("num_ret", "num_rel", "num_rel_ret"):
            base, k = n.rsplit("_", 1)
            cutoffs.setdefault(base, []).append(k)
        else:
            plain.add(n)
    return plain | {f"{b}.{','.join(ks)}" for b, ks in cutoffs.items()}


def _compare(qrels, run, level):
    ours = metrics.evaluate(qrels, run, PYTREC_MEASURES, level=level)
    ref = pytrec_eval.RelevanceEvaluator(qrels, _pytrec_names(PYTREC_MEASURES), relevance_level=level).evaluate(run)
    assert set(ref) == set(ours.per_query.index)
    for qid, values in ref.items():
        for m in PYTREC_MEASURES:
            assert ours.per_query.loc[qid, m] == pytest.approx(values[m], abs=1e-9), (qid, m)
    return len(ref)


def _random_case(rng, n_queries, tie_values):
    docs = [f"d{i}" for i in range(12)] + ["D1", "d1a", "é1"]
    qrels, run = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        if rng.random() < 0.9:
            judged = rng.choice(len(docs), size=rng.integers(1, 8), replace=False)
            qrels[qid] = {docs[j]: int(rng.integers(-1, 4)) for j in judged}
            if max(qrels[qid].values()) < 0:
                # trec_eval itself (and so pytrec_eval) loops forever on a query whose every
                # judgement is negative (no relevance level >= 0 to build an ideal ranking from);
                # lookalike scores such a query 0 — see test_query_with_only_negative_judgements.
                qrels[qid][docs[judged[0]]] = 0
        if rng.random() < 0.9:
            ret = rng.choice(len(docs), size=rng.integers(1, len(docs)), replace=False)
            run[qid] = {docs[j]: float(rng.choice(tie_values)) for j in ret}
    return qrels, run


def test_differential_against_pytrec_eval_thousands_of_queries():
    rng = np.random.default_rng(20261130)
    total = 0
    for level in (1, 2):
        qrels, run = _random_case(rng, 3000, tie_values=[0.0, 0.5, 1.0, 1.5, -2.0, 3.25])
        total += _compare(qrels, run, level)
    assert total > 4000


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.sampled_from([1, 2]))
def test_differential_against_pytrec_eval_property(seed, n_queries, level):
    rng = np.random.default_rng(seed)
    qrels, run = _random_case(rng, n_queries, tie_values=rng.normal(size=3).round(2).tolist())
    if not (set(qrels) & set(run)):
        return
    _compare(qrels, run, level)


def _files_of(trec_dir):
    """trec_eval's own test qrels and runs as frames (the files every conformance case reads)."""
    import pandas as pd

    q = pd.read_csv(trec_dir / "qrels.test", sep=r"\s+", header=None, usecols=[0, 2, 3],
                    names=["query_id", "it", "unit_id", "relevance"], dtype={"query_id": str, "unit_id": str})
    r = pd.read_csv(trec_dir / "results.test", sep=r"\s+", header=None, usecols=[0, 2, 4],
                    names=["query_id", "q0", "unit_id", "rank", "score", "tag"],
                    dtype={"query_id": str, "unit_id": str})
    return q, r


@pytest.mark.shared_data
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_all_trec_never_crashes_on_reshaped_trec_eval_files(trec_dir, data):
    """Random files drawn from trec_eval's own test files: queries dropped from the run or from the qrels,
    rankings emptied, every judgement of a query made irrelevant — every all_trec measure under -c, -J, -M
    and -l2 gives a number (or trec_eval's text) for every query, and never raises."""
    import pandas as pd

    qrels, run = _files_of(trec_dir)
    qids = sorted(set(qrels["query_id"]) | set(run["query_id"]))
    pick = data.draw(st.lists(st.sampled_from(qids), min_size=1, max_size=6, unique=True))
    kind = data.draw(st.lists(st.sampled_from(["drop-run", "drop-qrels", "irrelevant", "keep"]),
                              min_size=len(pick), max_size=len(pick)))
    q, r = qrels[qrels["query_id"].isin(pick)].copy(), run[run["query_id"].isin(pick)].copy()
    for qid, what in zip(pick, kind):
        if what == "drop-run":
            r = r[r["query_id"] != qid]
        elif what == "drop-qrels":
            q = q[q["query_id"] != qid]
        elif what == "irrelevant":
            q.loc[q["query_id"] == qid, "relevance"] = 0
    if q.empty:
        return
    opts = data.draw(st.fixed_dictionaries({"complete": st.booleans(), "judged_only": st.booleans(),
                                            "max_docs": st.sampled_from([None, 1, 5, 1000]),
                                            "level": st.sampled_from([1, 2])}))
    r = r[["query_id", "unit_id", "score"]].reset_index(drop=True)
    if r.empty:
        r = pd.DataFrame({"query_id": pd.Series([], dtype=object), "unit_id": pd.Series([], dtype=object),
                          "score": pd.Series([], dtype="float64")})
    ev = metrics.evaluate(q[["query_id", "unit_id", "relevance"]].reset_index(drop=True), r, ["all_trec"], **opts)
    assert len(ev.per_query.columns) > 40
    if len(ev.per_query):
        assert np.isfinite(ev.per_query.to_numpy(dtype=np.float64)).all(), ev.per_query.columns[
            ~np.isfinite(ev.per_query.to_numpy(dtype=np.float64)).all(axis=0)].tolist()
