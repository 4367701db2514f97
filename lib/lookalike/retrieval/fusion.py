"""Fusion: how several systems' runs become one ranking, and the registry of fusion methods by name.

The catalogue's fused systems (retrieval.catalog: pixels-rrf, hybrid-rrf) and stage 07's fusion trace
ask the registry (``fuse``); every fused run comes back in the canonical order of lookalike.eval.metrics
(score descending, ties by unit id descending), cut at depth."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lookalike.eval.metrics import rank
from lookalike.registry import Registry


def rrf(runs: Mapping[str, pd.DataFrame] | Sequence[pd.DataFrame], k: int = 60, depth: int = 100) -> pd.DataFrame:
    """Reciprocal rank fusion: score(u) = sum over runs of 1 / (k + rank(u)) (Cormack et al. 2009)."""
    runs = list(runs.values()) if isinstance(runs, Mapping) else list(runs)
    parts = []
    for run in runs:
        r = rank(run)
        parts.append(pd.DataFrame({"query_id": r["query_id"], "unit_id": r["unit_id"], "score": 1.0 / (k + r["rank"])}))
    fused = pd.concat(parts).groupby(["query_id", "unit_id"], as_index=False)["score"].sum()
    out = rank(fused)
    return out.loc[out["rank"] <= depth, ["query_id", "unit_id", "score"]].reset_index(drop=True)


def round_robin(runs: Mapping[str, pd.DataFrame] | Sequence[pd.DataFrame], depth: int = 100) -> pd.DataFrame:
    """Interleave the runs' rankings (first of each, then second of each, ...), skipping duplicates.

    The fused score is depth - position, so the canonical ranking reproduces the interleaving.
    """
    runs = list(runs.values()) if isinstance(runs, Mapping) else list(runs)
    ranked = [rank(r) for r in runs]
    queries = sorted(set().union(*(set(r["query_id"]) for r in ranked)))
    lists = [{q: list(g["unit_id"]) for q, g in r.groupby("query_id", sort=False)} for r in ranked]
    rows = []
    for q in queries:
        seen, order = set(), []
        columns = [lst.get(q, []) for lst in lists]
        for i in range(max((len(c) for c in columns), default=0)):
            for c in columns:
                if i < len(c) and c[i] not in seen:
                    seen.add(c[i])
                    order.append(c[i])
        order = order[:depth]
        rows.extend((q, u, float(len(order) - j)) for j, u in enumerate(order))
    return pd.DataFrame(rows, columns=["query_id", "unit_id", "score"])


def normalise_scores(run: pd.DataFrame, method: str = "minmax") -> pd.DataFrame:
    """Per-query score normalisation: minmax (to [0, 1]) or zscore (mean 0, sd 1); constant scores -> 0."""
    g = run.groupby("query_id")["score"]
    if method == "minmax":
        lo, hi = g.transform("min"), g.transform("max")
        span = (hi - lo).replace(0.0, np.nan)
        score = ((run["score"] - lo) / span).fillna(0.0)
    elif method == "zscore":
        mu, sd = g.transform("mean"), g.transform("std", ddof=0)
        score = ((run["score"] - mu) / sd.replace(0.0, np.nan)).fillna(0.0)
    else:
        raise ValueError(f"unknown normalisation {method!r}; expected minmax or zscore")
    return run.assign(score=score.to_numpy())


def score_sum(runs: Mapping[str, pd.DataFrame] | Sequence[pd.DataFrame], method: str = "minmax",
              weights: Sequence[float] | None = None, depth: int = 100) -> pd.DataFrame:
    """Normalised score sum (CombSUM); a unit missing from a run contributes 0 from it."""
    runs = list(runs.values()) if isinstance(runs, Mapping) else list(runs)
    weights = list(weights) if weights is not None else [1.0] * len(runs)
    parts = [normalise_scores(r, method).assign(score=lambda d, w=w: d["score"] * w) for r, w in zip(runs, weights)]
    fused = pd.concat(parts).groupby(["query_id", "unit_id"], as_index=False)["score"].sum()
    out = rank(fused)
    return out.loc[out["rank"] <= depth, ["query_id", "unit_id", "score"]].reset_index(drop=True)


@dataclass(frozen=True)
class FusionSpec:
    """A fusion method: its name, the function that fuses runs, and one line saying how."""
    name: str
    fuse: Callable[[list, int, int], pd.DataFrame]     # (runs, rrf_k, depth) -> fused run
    what: str                                          # one line: how the runs are combined


FUSIONS: Registry[FusionSpec] = Registry("fusion method")
FUSIONS.register(FusionSpec("rrf", lambda runs, k, depth: rrf(runs, k=k, depth=depth),
                            "reciprocal rank fusion: the sum over runs of 1 / (k + rank)"))
FUSIONS.register(FusionSpec("round-robin", lambda runs, k, depth: round_robin(runs, depth=depth),
                            "each run's next unseen unit in turn"))
FUSIONS.register(FusionSpec("score-sum", lambda runs, k, depth: score_sum(runs, depth=depth),
                            "the sum of each run's normalised scores"))


def fuse(method: str, runs: Sequence[pd.DataFrame], rrf_k: int = 60, depth: int = 100) -> pd.DataFrame:
    """The runs fused by the named method (an unknown name is refused with the known ones)."""
    return FUSIONS[method].fuse(list(runs), rrf_k, depth)
