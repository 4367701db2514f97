"""Agreement between two judges (or two people): Cohen's kappa overall and on the sufficient /
supporting boundary, its bootstrap CI, and the confusion matrix. The words a report uses for them are
report.summary.kappa_words."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


from lookalike.judging.protocol import ABSTAIN
from lookalike.vocab import LABELS




def cohen_kappa(a: Sequence[str], b: Sequence[str], labels: Sequence[str] = LABELS) -> float:
    """Cohen's kappa of two label sequences over the given label set (nan when undefined)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"kappa needs paired labels: {len(a)} vs {len(b)}")
    if not a or len(set(a)) < 2 or len(set(b)) < 2:
        # one judge gave one label throughout: chance agreement is then the agreement itself and
        # kappa comes out 0 whatever the other judge did — a number that measures nothing
        return float("nan")
    cm = confusion(a, b, labels).to_numpy(dtype=float)
    n = cm.sum()
    po = np.trace(cm) / n
    pe = float((cm.sum(axis=1) * cm.sum(axis=0)).sum() / n**2)
    return float("nan") if pe == 1.0 else float((po - pe) / (1 - pe))


def boundary_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Kappa on the sufficient/supporting boundary: over the items both judges called relevant
    (sufficient or supporting), do they agree on which?"""
    pairs = [(x, y) for x, y in zip(a, b) if x != "irrelevant" and y != "irrelevant"]
    return cohen_kappa([x for x, _ in pairs], [y for _, y in pairs], labels=("sufficient", "supporting"))


def confusion(a: Sequence[str], b: Sequence[str], labels: Sequence[str] = LABELS) -> pd.DataFrame:
    """Counts: rows the first judge's labels, columns the second's."""
    idx = {lab: i for i, lab in enumerate(labels)}
    cm = np.zeros((len(labels), len(labels)), dtype=int)
    for x, y in zip(a, b):
        cm[idx[x], idx[y]] += 1
    return pd.DataFrame(cm, index=pd.Index(labels, name="first"), columns=pd.Index(labels, name="second"))




KAPPA_SLAB = 1 << 20      # resampled pairs counted at a time by kappa_ci


def kappa_ci(a: Sequence[str], b: Sequence[str], n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of Cohen's kappa, pairs resampled (nan when undefined)."""
    code = {lab: i for i, lab in enumerate(LABELS)}
    x = np.asarray([code[v] for v in a], dtype=np.int64)
    y = np.asarray([code[v] for v in b], dtype=np.int64)
    n, m = len(x), len(LABELS)
    if n < 2 or len(set(x.tolist())) < 2 or len(set(y.tolist())) < 2:
        return float("nan"), float("nan")
    # The same draws as integers(0, n, size=(n_boot, n)) in int64 (numpy takes both from one 32-bit
    # stream), held in int32; each pair's (first, second) cell coded once; the replicates' cells
    # counted a slab at a time. So no (n_boot × n) array but the draws is made: at 55,000 pairs
    # four such arrays would take 440 MB each.
    idx = np.random.default_rng([seed, 77]).integers(0, n, size=(n_boot, n),
                                                     dtype=np.int32 if n <= np.iinfo(np.int32).max else np.int64)
    pair_cell = x * m + y
    cm = np.empty((n_boot, m * m))
    step = max(1, KAPPA_SLAB // n)
    for start in range(0, n_boot, step):
        rows = idx[start:start + step]
        cells = pair_cell[rows] + (np.arange(len(rows), dtype=np.int64)[:, None] * (m * m))
        cm[start:start + len(rows)] = np.bincount(cells.ravel(), minlength=len(rows) * m * m).reshape(len(rows), m * m)
    cm = cm.reshape(n_boot, m, m)
    po = np.trace(cm, axis1=1, axis2=2) / n
    pe = (cm.sum(axis=2) * cm.sum(axis=1)).sum(axis=1) / n ** 2
    # a replicate in which either judge drew one label only has no kappa (as cohen_kappa)
    one_label = ((cm.sum(axis=2) > 0).sum(axis=1) < 2) | ((cm.sum(axis=1) > 0).sum(axis=1) < 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas = np.where((pe < 1.0) & ~one_label, (po - pe) / (1 - pe), np.nan)
    values = kappas[~np.isnan(kappas)]
    if not len(values):
        return float("nan"), float("nan")
    lo, hi = np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def agreement(first: Sequence[str], second: Sequence[str], seed: int = 0) -> dict:
    """n, raw agreement, Cohen's kappa with a bootstrap 95% CI (pairs resampled), and kappa on the
    sufficient/supporting boundary."""
    a, b = list(first), list(second)
    boundary = [(x, y) for x, y in zip(a, b) if x != "irrelevant" and y != "irrelevant"]
    lo, hi = kappa_ci(a, b, seed=seed)
    return {"n": len(a), "agreement": float(np.mean([x == y for x, y in zip(a, b)])) if a else float("nan"),
            "kappa": cohen_kappa(a, b), "kappa_lo": lo, "kappa_hi": hi, "n_boundary": len(boundary),
            "kappa_boundary": boundary_kappa(a, b)}


def labelled_by_both(first: pd.Series, second: pd.Series, first_name: str, second_name: str, what: str = "pairs"
                     ) -> tuple[np.ndarray, str]:
    """(mask of the pairs both judges labelled, the sentence saying how many were left out and why): a pair
    either judge abstained on (it could not see what a label needs) is counted, never coded as a label."""
    a, b = np.asarray(first, dtype=object), np.asarray(second, dtype=object)
    both = (a != ABSTAIN) & (b != ABSTAIN)
    if both.all():
        return both, ""
    return both, (f"{int((~both).sum())} of {len(both)} {what} left out of the agreement: {int((b == ABSTAIN).sum())} "
                  f"the {second_name} judge abstained on, {int((a == ABSTAIN).sum())} the {first_name} judge did")
