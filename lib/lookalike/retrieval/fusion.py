"""Fusion methods by name (one registry): how several systems' runs become one ranking.

The catalogue's fused systems (retrieval.catalog: pixels-rrf, hybrid-rrf) and stage 07's fusion trace
ask this registry; the rankings themselves are computed by retrieval.indexes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from lookalike.registry import Registry
from lookalike.retrieval import indexes


@dataclass(frozen=True)
class FusionSpec:
    name: str
    fuse: Callable[[list, int, int], pd.DataFrame]     # (runs, rrf_k, depth) -> fused run
    what: str                                          # one line: how the runs are combined


FUSIONS: Registry[FusionSpec] = Registry("fusion method")
FUSIONS.register(FusionSpec("rrf", lambda runs, k, depth: indexes.rrf(runs, k=k, depth=depth),
                            "reciprocal rank fusion: the sum over runs of 1 / (k + rank)"))
FUSIONS.register(FusionSpec("round-robin", lambda runs, k, depth: indexes.round_robin(runs, depth=depth),
                            "each run's next unseen unit in turn"))
FUSIONS.register(FusionSpec("score-sum", lambda runs, k, depth: indexes.score_sum(runs, depth=depth),
                            "the sum of each run's normalised scores"))


def fuse(method: str, runs: Sequence[pd.DataFrame], rrf_k: int = 60, depth: int = 100) -> pd.DataFrame:
    """The runs fused by the named method (an unknown name is refused with the known ones)."""
    return FUSIONS[method].fuse(list(runs), rrf_k, depth)
