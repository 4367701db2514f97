"""Honest statistics over per-query values: CIs, analytic SEs, paired comparisons.

Every function takes a numpy.random.Generator (or a seed) explicitly, so the same params give the
same intervals. Percentile bootstrap over queries by default; with ``clusters`` the resampling
unit is the cluster (e.g. questions generated from one document), and the statistic is the mean
over all queries of the drawn clusters.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.stats

Z95 = 1.959963984540054  # standard normal 0.975 quantile
# The fewest resamples the public API and `lookalike eval` accept: below this a 95% interval's ends
# rest on a handful of draws (each end on 5 of 200), and a randomisation p-value cannot go below 1/201.
MIN_RESAMPLES = 200


def check_resamples(n: int, argument: str) -> int:
    """n as a count of resamples, refused (ValueError naming the argument) below MIN_RESAMPLES."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{argument}: expected a whole number of resamples, got {type(n).__name__} {n!r}")
    if n < MIN_RESAMPLES:
        raise ValueError(f"{argument} must be at least {MIN_RESAMPLES} (got {n}): with fewer resamples an "
                         "interval's ends or a p-value rest on a handful of draws")
    return int(n)


def _rng(rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def bootstrap_means(values: np.ndarray, n_boot: int, rng: np.random.Generator, clusters=None,
                chunk: int = 2_000_000) -> np.ndarray:
    """n_boot bootstrap means of values (resampling queries, or clusters of queries)."""
    values = np.asarray(values, dtype=np.float64)
    if clusters is None:
        sums, sizes = values, np.ones(len(values))
    else:
        codes, _ = pd.factorize(np.asarray(clusters), sort=True)
        sums = np.bincount(codes, weights=values)
        sizes = np.bincount(codes).astype(np.float64)
    n = len(sums)
    out = np.empty(n_boot)
    step = max(1, chunk // max(n, 1))
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        idx = rng.integers(0, n, size=(b, n))
        out[start:start + b] = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
    return out


@dataclass(frozen=True)
class Interval:
    """A figure with its 95% interval: the estimate, the interval's ends, the n it rests on and the method that
    made it."""
    estimate: float
    lo: float
    hi: float
    n: int
    method: str


def bootstrap_ci(values, n_boot: int = 2000, alpha: float = 0.05, rng=0, clusters=None) -> Interval:
    """Percentile bootstrap CI of the mean of per-query values (cluster bootstrap when clusters given)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "bootstrap")
    means = bootstrap_means(values, n_boot, _rng(rng), clusters)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    method = "cluster bootstrap" if clusters is not None else "bootstrap"
    return Interval(float(values.mean()), float(lo), float(hi), len(values), method)


def proportion_se(p: float, n: int) -> float:
    """Analytic standard error of a proportion: sqrt(p (1 - p) / n)."""
    return math.sqrt(p * (1.0 - p) / n) if n > 0 else math.nan


def proportion_ci(successes: int, n: int, level: float = 0.95) -> Interval:
    """Wilson score interval of a proportion, from scipy (never zero-width at 0 or 1, unlike the
    Wald interval p ± z·SE, which this replaced)."""
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "Wilson")
    k = int(round(successes))
    if k != successes or not 0 <= k <= n:
        raise ValueError(f"proportion_ci needs a whole count of successes between 0 and n={n}, got {successes!r}")
    ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return Interval(k / n, float(ci.low), float(ci.high), n, "Wilson")


@dataclass(frozen=True)
class Comparison:
    """a − b on the same queries."""

    delta: float
    lo: float
    hi: float
    p_bootstrap: float
    p_randomisation: float
    n: int


def paired_bootstrap(a, b, n_boot: int = 2000, alpha: float = 0.05, rng=0, clusters=None) -> tuple[float, float, float, float]:
    """Mean difference a − b with a percentile CI and a two-sided bootstrap p-value.

    The p-value is twice the smaller share of bootstrap means of the differences that fall on
    either side of 0 (with one added to numerator and denominator, so it is never 0).
    """
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if not len(d):                      # no paired questions: no difference to estimate (and no warning)
        return float("nan"), float("nan"), float("nan"), float("nan")
    means = bootstrap_means(d, n_boot, _rng(rng), clusters)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    below = (np.sum(means <= 0) + 1) / (n_boot + 1)
    above = (np.sum(means >= 0) + 1) / (n_boot + 1)
    return float(d.mean()), float(lo), float(hi), float(min(1.0, 2 * min(below, above)))


def randomisation_test(a, b, n_perm: int = 10000, rng=0, clusters=None) -> float:
    """Two-sided paired randomisation (sign-flip) test of mean(a − b) = 0; p includes the observed.
    clusters: one label per query; the queries of a cluster flip together (the same clusters the
    bootstrap resamples)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = len(d)
    if n == 0:
        return math.nan
    observed = abs(d.mean())
    gen = _rng(rng)
    if clusters is None:
        codes, m = np.arange(n), n
    else:
        codes, uniq = pd.factorize(np.asarray(clusters), sort=True)
        m = len(uniq)
    sums = np.bincount(codes, weights=d, minlength=m)          # a cluster's flip moves its sum
    hits = 0
    step = max(1, 2_000_000 // max(m, 1))
    for start in range(0, n_perm, step):
        k = min(step, n_perm - start)
        signs = gen.integers(0, 2, size=(k, m)) * 2 - 1
        hits += int(np.sum(np.abs((signs * sums).sum(axis=1) / n) >= observed - 1e-12))
    return (hits + 1) / (n_perm + 1)


def compare(a, b, n_boot: int = 2000, n_perm: int = 10000, rng=0, clusters=None) -> Comparison:
    """Paired comparison of two systems' per-query values (same queries, same order)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired comparison needs the same queries: {a.shape} vs {b.shape}")
    gen = _rng(rng)
    delta, lo, hi, p_boot = paired_bootstrap(a, b, n_boot, rng=gen, clusters=clusters)
    p_rand = randomisation_test(a, b, n_perm, rng=gen, clusters=clusters)
    return Comparison(delta, lo, hi, p_boot, p_rand, len(a))


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (same order as given)."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="mergesort")
    m = len(p)
    adjusted = np.empty(m)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[j]))
        adjusted[j] = running
    return adjusted


def comparison_table(per_query: Mapping[str, pd.Series], baseline: str | None = None, n_boot: int = 2000,
                     n_perm: int = 10000, seed: int = 0, clusters: pd.Series | None = None) -> pd.DataFrame:
    """One row per system: mean with bootstrap CI, and the paired comparison with the baseline.

    per_query: system -> Series of one measure indexed by query_id; the systems are aligned on the
    queries they share (the count is reported as n). Columns: system, n, mean, ci_lo, ci_hi,
    delta, delta_lo, delta_hi, p_bootstrap, p_randomisation, p_holm (over the non-baseline rows),
    baseline, cluster (what was resampled: 'query' or the cluster unit's name, clusters.name).
    """
    names = sorted(per_query)
    baseline = baseline or names[0]
    frame = pd.DataFrame({k: per_query[k] for k in names}).dropna()
    cl = cluster_array(clusters, list(frame.index))
    rows = []
    for name in names:
        # every system draws the same resamples of the same queries (seeded from the run seed alone),
        # so adding a system moves no other system's interval
        ci = bootstrap_ci(frame[name].to_numpy(), n_boot, rng=np.random.default_rng([seed, 0]), clusters=cl)
        gen = np.random.default_rng([seed, 1])
        row = dict(system=name, n=len(frame), mean=ci.estimate, ci_lo=ci.lo, ci_hi=ci.hi)
        if name != baseline:
            c = compare(frame[name].to_numpy(), frame[baseline].to_numpy(), n_boot, n_perm, rng=gen, clusters=cl)
            row.update(delta=c.delta, delta_lo=c.lo, delta_hi=c.hi, p_bootstrap=c.p_bootstrap,
                       p_randomisation=c.p_randomisation)
        rows.append(row)
    out = pd.DataFrame(rows, columns=["system", "n", "mean", "ci_lo", "ci_hi", "delta", "delta_lo", "delta_hi",
                                      "p_bootstrap", "p_randomisation"])
    mask = out["system"] != baseline
    out["p_holm"] = np.nan
    if mask.any():
        out.loc[mask, "p_holm"] = holm(out.loc[mask, "p_randomisation"].to_numpy())
    out["baseline"] = baseline
    out["cluster"] = (clusters.name or "cluster") if clusters is not None else "query"
    return out


def pairwise_table(per_query: Mapping[str, pd.Series], n_boot: int = 2000, n_perm: int = 10000, seed: int = 0,
                   clusters: pd.Series | None = None) -> pd.DataFrame:
    """Every pair of systems compared on the same queries: one row per unordered pair (system, and
    the other system in ``baseline``), with comparison_table's columns. p_holm adjusts over all the
    pairs (one family per call). Each system's mean and CI draw the same resamples as in
    comparison_table; each pair's test is seeded from the run seed and the two names alone, so
    adding a system moves no other pair's p-value before adjustment."""
    names = sorted(per_query)
    frame = pd.DataFrame({k: per_query[k] for k in names}).dropna()
    cl = cluster_array(clusters, list(frame.index))
    cis = {k: bootstrap_ci(frame[k].to_numpy(), n_boot, rng=np.random.default_rng([seed, 0]), clusters=cl)
           for k in names}
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            gen = np.random.default_rng([seed, 2, zlib.crc32(a.encode("utf-8")), zlib.crc32(b.encode("utf-8"))])
            c = compare(frame[a].to_numpy(), frame[b].to_numpy(), n_boot, n_perm, rng=gen, clusters=cl)
            rows.append(dict(system=a, n=len(frame), mean=cis[a].estimate, ci_lo=cis[a].lo, ci_hi=cis[a].hi,
                             delta=c.delta, delta_lo=c.lo, delta_hi=c.hi, p_bootstrap=c.p_bootstrap,
                             p_randomisation=c.p_randomisation, baseline=b))
    out = pd.DataFrame(rows, columns=["system", "n", "mean", "ci_lo", "ci_hi", "delta", "delta_lo", "delta_hi",
                                      "p_bootstrap", "p_randomisation", "baseline"])
    out.insert(10, "p_holm", holm(out["p_randomisation"].to_numpy()) if len(out) else [])
    out["cluster"] = (clusters.name or "cluster") if clusters is not None else "query"
    return out


def sample_size(delta: float, lo: float, hi: float, n: int, alpha: float = 0.05, power: float = 0.8) -> dict:
    """The sample-size planner for one paired comparison, from its own interval: the standard error
    read off the paired bootstrap CI (clustered as the CI was: SE = (hi - lo) / (2 z_{1-alpha/2})),
    the smallest difference resolvable at this n (the CI's half-width, z_{1-alpha/2} SE), and the
    questions needed to resolve the observed difference at the given power (two-sided, normal
    approximation; SE shrinks as 1/sqrt(n)): n ((z_{1-alpha/2} + z_power) SE / |delta|)^2, rounded up.
    An observed difference of 0 needs no finite n (inf)."""
    z_a, z_b = scipy.stats.norm.ppf(1 - alpha / 2), scipy.stats.norm.ppf(power)
    se = (hi - lo) / (2 * z_a) if n else math.nan
    resolvable = z_a * se
    if not n or not math.isfinite(se):
        need = math.nan
    elif abs(delta) < 1e-12:
        need = math.inf
    else:
        need = float(math.ceil(n * ((z_a + z_b) * se / abs(delta)) ** 2))
    return {"se": se, "resolvable": resolvable, "n_needed": need}


CLUSTER_UNITS = ("document", "template", "none")


def fit_log_line(log_sizes: np.ndarray, values: np.ndarray, at: float) -> np.ndarray:
    """Least-squares line value = a + b log(size) for each row of values (draws × sizes), evaluated
    at log size `at`."""
    x = log_sizes - log_sizes.mean()
    b = (values - values.mean(axis=1, keepdims=True)) @ x / float(x @ x)
    return values.mean(axis=1) + b * (at - log_sizes.mean())


# the units column each clustering resamples by
CLUSTER_COLUMNS = {"document": "doc_id", "template": "template_id"}


def unit_clusters(units: pd.DataFrame, how: str = "document") -> dict[str, str] | None:
    """unit_id -> the cluster it belongs to under stats.cluster (its doc_id or template_id); None for
    'none'. The leak gate resamples units by it, as query_clusters resamples questions."""
    if how not in CLUSTER_UNITS:
        raise ValueError(f"stats.cluster must be one of {', '.join(CLUSTER_UNITS)}, got {how!r}")
    if how == "none":
        return None
    return dict(zip(units["unit_id"], units[CLUSTER_COLUMNS[how]].astype(str)))


def query_clusters(gold: Mapping[str, str], units: pd.DataFrame, how: str = "document") -> pd.Series | None:
    """query_id -> the cluster its gold unit belongs to (its document's doc_id, or its template_id),
    named for the cluster unit; None for 'none' (queries resampled one by one). Questions share
    pages and decks, so their values are not independent: intervals resample whole clusters."""
    if how not in CLUSTER_UNITS:
        raise ValueError(f"stats.cluster must be one of {', '.join(CLUSTER_UNITS)}, got {how!r}")
    if how == "none":
        return None
    of = units.set_index("unit_id")[CLUSTER_COLUMNS[how]].astype(str)
    ids = list(gold)
    values = [of.get(str(gold[q]).split(";")[0], f"unknown:{q}") or f"none:{q}" for q in ids]
    return pd.Series(values, index=pd.Index(ids, name="query_id"), name=how)


def cluster_array(clusters: pd.Series | None, query_ids: Sequence[str]):
    """The clusters of query_ids in their order (None passes through; a query without one is its own)."""
    if clusters is None:
        return None
    return np.asarray([clusters.get(q, f"self:{q}") for q in query_ids], dtype=object)



def interval_words(clusters: pd.Series | None) -> str:
    """How an interval was made, for a table's interval column."""
    return "bootstrap 95%, questions resampled" if clusters is None else f"bootstrap 95%, {clusters.name}s resampled"
