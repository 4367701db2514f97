"""The haystack curve: how a figure measured on this corpus falls as the corpus grows.

Every question is ranked against nested random subsamples of the corpus (10%, 25%, 50%, 100% by
default; a smaller subsample is a subset of every larger one) with its gold and its hard
distractors always kept, so what changes from one size to the next is only how much unrelated hay
surrounds the needle. Per system and measure, the mean over the same questions at each size with
a bootstrap 95% CI (one set of resamples shared by all sizes), and — when the target corpus size
(report.target_corpus_size) is larger than this corpus — a straight-line fit in log corpus size,
extrapolated to the target, its interval from refitting every bootstrap resample. An
extrapolation is a guess about data that was not measured: it is flagged as one in its own
column and drawn dashed, and its interval holds only the sampling uncertainty of the line — not
the doubt that a line in log size is the right shape (shares are clipped to [0, 1]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.analysis.scoring import SharedCandidates
from lookalike.eval import stats

FRACTIONS = (0.1, 0.25, 0.5, 1.0)
CURVE_COLUMNS = ["system", "measure", "corpus_size", "n", "value", "lo", "hi", "extrapolated"]


def subsample_sizes(n_units: int, fractions: Sequence[float] = FRACTIONS) -> list[int]:
    """The corpus sizes the fractions give (at least 1 unit each, duplicates dropped, ascending)."""
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        raise ValueError(f"report.haystack_fractions: every fraction must lie in (0, 1], got {list(fractions)}")
    return sorted({max(1, int(round(f * n_units))) for f in fractions})


def nested_subsamples(unit_ids: Sequence[str], sizes: Sequence[int], seed: int) -> dict[int, list[str]]:
    """size -> the first `size` units of one seeded permutation of the corpus (so every subsample
    holds the smaller ones), each list in the corpus's own order."""
    unit_ids = list(unit_ids)
    order = np.random.default_rng([seed, 1701]).permutation(len(unit_ids))
    rank = np.empty(len(unit_ids), dtype=np.int64)
    rank[order] = np.arange(len(unit_ids))
    return {int(s): [u for u, r in zip(unit_ids, rank) if r < s] for s in sizes}


def candidate_sets(kept: Mapping[str, Sequence[str]], subsamples: Mapping[int, Sequence[str]]
                   ) -> dict[int, SharedCandidates]:
    """size -> query_id -> its candidates: the subsample (shared by every question) plus the units
    always kept for it (its gold and hard distractors), without repeats."""
    return {size: SharedCandidates(sub, kept) for size, sub in subsamples.items()}


def curve(per_query: Mapping[tuple[str, str], pd.DataFrame], target_size: int | None = None,
          clusters: pd.Series | None = None, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The curve table (CURVE_COLUMNS). per_query: (system, measure) -> frame indexed by query_id,
    one column per corpus size (the per-question value at that size). Sizes and questions must be
    the same across the frame's columns; every size shares one set of bootstrap resamples."""
    rows = []
    for (system, measure), frame in sorted(per_query.items()):
        frame = frame.reindex(columns=sorted(frame.columns))
        sizes = np.array(frame.columns, dtype=np.float64)
        n = len(frame)
        if n == 0:
            continue
        cl = stats.cluster_array(clusters, list(frame.index))
        # one seed for every size and every system: the same resampled questions at every point of every
        # curve, so adding or removing a system moves no other system's interval
        draws = np.column_stack([stats.bootstrap_means(frame[c].to_numpy(dtype=np.float64), n_boot,
                                                   np.random.default_rng([seed, 71]), cl) for c in frame.columns])
        means = frame.mean(axis=0).to_numpy()
        lo, hi = np.quantile(draws, [0.025, 0.975], axis=0)
        for s, v, a, b in zip(frame.columns, means, lo, hi):
            rows.append({"system": system, "measure": measure, "corpus_size": int(s), "n": n, "value": float(v),
                         "lo": float(a), "hi": float(b), "extrapolated": False})
        if target_size is not None and target_size > sizes.max() and len(sizes) >= 2:
            at = np.log(float(target_size))
            point = float(np.clip(stats.fit_log_line(np.log(sizes), means[None, :], at)[0], 0.0, 1.0))
            fits = np.clip(stats.fit_log_line(np.log(sizes), draws, at), 0.0, 1.0)
            a, b = np.quantile(fits, [0.025, 0.975])
            rows.append({"system": system, "measure": measure, "corpus_size": int(target_size), "n": n,
                         "value": point, "lo": float(a), "hi": float(b), "extrapolated": True})
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def slope_words(table: pd.DataFrame, system: str, measure: str) -> str:
    """'0.91 at 15 units → 0.62 at 152 units' for one system and measure (measured points only)."""
    t = table[(table["system"] == system) & (table["measure"] == measure) & ~table["extrapolated"].astype(bool)]
    if t.empty:
        return ""
    first, last = t.iloc[0], t.iloc[-1]
    return f"{first['value']:.2f} at {int(first['corpus_size'])} units → {last['value']:.2f} at {int(last['corpus_size'])}"
