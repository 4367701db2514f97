"""Statistics (eval.stats): seeded and clustered bootstraps, proportion intervals, paired tests with Holm, the randomisation test, query clusters and the sample-size planner."""

from __future__ import annotations

import math
import numpy as np
import pandas as pd
import pytest
from lookalike.eval import stats


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
