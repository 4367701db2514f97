"""The leak gate: per pixel system, the paired blind / caption-derived difference in recall@10 with its
bootstrap CI (units resampled by cluster) against leak.threshold, and the metadata probe; LEAK, PASS or
NOT EVALUATED."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.eval import stats
from lookalike.analysis.leak_ablation import PIXEL_SYSTEMS


def gate_results(per_query: pd.DataFrame, pixel_pq: pd.DataFrame, probe: Mapping[str, tuple] | None,
                 threshold: float = 0.05, n_boot: int = 2000, seed: int = 0,
                 unit_clusters: Mapping[str, str] | None = None) -> list:
    """The gate as stage 03 and ``lookalike leak-check`` decide it: the image index on the judged
    per-query table first, then every other pixel system (``gate_all``), each with its metadata probe."""
    probe = probe or {}
    image = paired_gate(per_query, "image", threshold, n_boot, seed, unit_clusters, probe.get("image"))
    return [image] + [g for g in gate_all(pixel_pq, threshold, n_boot, seed, unit_clusters, probe) if g.index != "image"]


def gate_all(pixel_pq: pd.DataFrame, threshold: float = 0.05, n_boot: int = 2000, seed: int = 0,
             unit_clusters: Mapping[str, str] | None = None, probe: Mapping[str, tuple] | None = None) -> list:
    """The paired gate on every pixel system (PIXEL_SYSTEMS present in pixel_pq), in order, each with
    its metadata probe when given."""
    present = list(dict.fromkeys(pixel_pq["index"])) if len(pixel_pq) else []
    names = ([n for n in PIXEL_SYSTEMS if n in present] + [n for n in present if n not in PIXEL_SYSTEMS]
             if present else ["image"])
    return [paired_gate(pixel_pq, n, threshold, n_boot, seed, unit_clusters, (probe or {}).get(n)) for n in names]


def overall(results: Sequence) -> str:
    """LEAK when any pixel system leaks; NOT EVALUATED when none could be evaluated; else PASS."""
    verdicts = [r.verdict for r in results]
    if "LEAK" in verdicts:
        return "LEAK"
    return "NOT EVALUATED" if all(v == "NOT EVALUATED" for v in verdicts) else "PASS"


def gate(table: pd.DataFrame, threshold: float = 0.05) -> tuple[bool, float, float]:
    """(passes, image recall@10 on blind, on caption-derived): the point estimates the report prints.
    The decision is ``paired_gate``'s."""
    img = table[table["index"] == "image"].set_index("query_set")["recall_10"]
    blind, derived = float(img["blind"]), float(img["caption-derived"])
    return derived - blind <= threshold, blind, derived


# normal quantiles of the power statement: a two-sided 95% interval, 80% power
_Z95, _Z80 = 1.959963984540054, 0.8416212335729143


@dataclass(frozen=True)
class GateResult:
    """The leak gate's verdict for one index: the paired caption-derived − blind recall@10 difference with its
    interval, the rule's threshold, the metadata probe's count and, when planted, the retrieval test's
    measured power."""
    index: str
    n_pairs: int
    blind: float
    derived: float
    difference: float                 # mean over target units of (caption-derived − blind) recall@10
    lo: float
    hi: float
    threshold: float
    verdict: str                      # PASS | LEAK | NOT EVALUATED
    probe_changed: int = -1           # units whose input changed when the caption fields were shuffled (-1: not probed)
    probe_n: int = 0
    probe_of: str = "units' input"    # what the probe compared: a built-in path's input, or a run file's rankings
    # the retrieval test's power measured in the same run: (difference, lo, hi, caught) of a caption-index
    # leak planted in the image index, judged by the retrieval difference alone (``planted_power``)
    planted: tuple[float, float, float, bool] | None = None

    @property
    def detectable(self) -> float:
        """The leak (caption-derived − blind recall@10) the retrieval test would call LEAK with 80% power
        at this n: the CI must clear 0 and the estimate the threshold, with the standard error read off
        the bootstrap interval (so clustered resampling counts). NaN without pairs."""
        if not self.n_pairs or self.lo != self.lo:
            return float("nan")
        se = (self.hi - self.lo) / (2 * _Z95)
        return max((_Z95 + _Z80) * se, self.threshold + _Z80 * se)

    @property
    def underpowered(self) -> bool:
        """The stated rule: the retrieval test is underpowered on this corpus when a caption-index leak
        planted in the same run (the image index reading the caption fields) is not caught by the
        retrieval difference alone; where none was planted, when the smallest leak it would catch with
        80% power is larger than the room above blind recall@10 (1 − blind) — not even a leak that
        found every caption-derived query's unit would be caught reliably."""
        if self.planted is not None:
            return not self.planted[3]
        if self.n_pairs and not self.hi - self.lo > 0:
            return True             # no spread: every unit scored alike on both sets, so nothing could be seen
        d = self.detectable
        return d == d and d > 0 and d > 1.0 - self.blind

    def planted_words(self) -> str:
        """The planted leak's result in words (empty when none was planted)."""
        if self.planted is None:
            return ""
        diff, lo, hi, caught = self.planted
        return (f"a caption-index leak planted in this run (the image index reading the caption fields) moved "
                f"caption-derived − blind recall@10 by {diff:+.3f} [{lo:+.3f}, {hi:+.3f}], and the retrieval test "
                + ("caught it" if caught else "did not catch it"))

    def power_words(self) -> str:
        """What a PASS of the retrieval test is worth: the smallest leak it would catch."""
        d = self.detectable
        if d != d:
            return ""
        if self.underpowered and not self.hi - self.lo > 0:
            return ("underpowered on this corpus: the retrieval test finds no spread in the differences (every unit "
                    "scored alike on both query sets), so it could not see a leak — "
                    + ("the probe is the evidence" if self.probe_changed >= 0 else
                       "and this system had no metadata probe, so nothing here would catch a leak"))
        if self.underpowered:
            why = (self.planted_words() if self.planted is not None else
                   f"more than the {1 - self.blind:.2f} room above blind recall@10")
            return (f"underpowered on this corpus: the retrieval test would catch only a leak of about {d:.2f} "
                    f"recall@10 or more with 80% power over {self.n_pairs} units; {why} — "
                    + ("the probe is the evidence" if self.probe_changed >= 0 else
                       "and this system had no metadata probe (bring a run on the shuffled corpus: "
                       "lookalike leak-check --shuffled-corpus), so nothing here would catch a leak"))
        return (f"the retrieval test would catch a leak of about {d:.2f} recall@10 or more with 80% power over "
                f"{self.n_pairs} units; a smaller one passes it"
                + (f"; {self.planted_words()}" if self.planted is not None else "")
                + ("" if self.probe_changed >= 0 else " — and this system had no metadata probe (a run file has no "
                   "input path to shuffle), so nothing else would catch it"))

    @property
    def rule(self) -> str:
        """The gate's rule in words, with this run's threshold."""
        return (f"LEAK when shuffling the caption fields among units changes what the system's index holds for any "
                f"unit, or when the paired difference's 95% bootstrap CI lies above 0 and its estimate exceeds "
                f"{self.threshold:.2f}")

    def probe_words(self) -> str:
        """The metadata probe's count in words (or that it did not run)."""
        if self.probe_changed < 0:
            return "metadata probe not run"
        return (f"metadata probe: {self.probe_changed} of {self.probe_n} {self.probe_of} changed with shuffled "
                "caption fields")

    def sentence(self) -> str:
        """The verdict in one sentence: the figure, its interval and n, and why when it is NOT EVALUATED."""
        if self.verdict == "NOT EVALUATED" and self.n_pairs:
            return (f"{self.index}: caption-derived − blind recall@10 {self.difference:+.3f} "
                    f"[{self.lo:+.3f}, {self.hi:+.3f}] over {self.n_pairs} paired units: NOT EVALUATED "
                    f"({self.power_words()})")
        if self.verdict == "NOT EVALUATED":
            return f"{self.index}: NOT EVALUATED (no blind / caption-derived pairs; {self.probe_words()})"
        if not self.n_pairs:
            return f"{self.index}: no blind / caption-derived pairs; {self.probe_words()}: {self.verdict}"
        power = self.power_words()
        return (f"{self.index}: caption-derived − blind recall@10 {self.difference:+.3f} "
                f"[{self.lo:+.3f}, {self.hi:+.3f}] over {self.n_pairs} paired units "
                f"(blind {self.blind:.3f}, caption-derived {self.derived:.3f}); {self.probe_words()}: {self.verdict}"
                + (f" — {power}" if power and self.verdict == "PASS" and self.underpowered
                   else f" ({power})" if power and self.verdict == "PASS" else ""))


def planted_power(planted_pq: pd.DataFrame, threshold: float = 0.05, n_boot: int = 2000, seed: int = 0,
                  unit_clusters: Mapping[str, str] | None = None) -> tuple[float, float, float, bool] | None:
    """The retrieval test's power on this corpus, measured: the image index's paired difference on the
    ablation run again with a caption-index leak planted (``inject="caption-index"``), and whether the
    retrieval test alone (no probe) calls it LEAK. None when no unit has both queries."""
    g = paired_gate(planted_pq, "image", threshold, n_boot, seed, unit_clusters)
    if not g.n_pairs:
        return None
    return g.difference, g.lo, g.hi, bool(g.lo > 0 and g.difference > threshold)


def run_probe(name: str, original: pd.DataFrame, shuffled: pd.DataFrame, depth: int = 10,
              tolerance: float = 1e-6) -> tuple[GateResult, list[str]]:
    """The metadata probe for a retriever that enters as a run file: its run on the corpus as it is
    against its run on the shuffled corpus (``lookalike leak-check --shuffled-corpus``: every unit's
    pixels its own, its file name, alt text and caption another unit's). A retriever that reads only
    pixels ranks both the same; a query whose top ``depth`` (units, in order, and scores within
    tolerance) differs means the caption fields reach it: LEAK. Compared on the queries both runs
    hold; returns the result and, in words, what could not be compared."""
    notes = []

    def top(run: pd.DataFrame) -> dict[str, list[tuple[str, float]]]:
        ordered = run.sort_values(["query_id", "score", "unit_id"], ascending=[True, False, True], kind="mergesort")
        return {q: list(zip(g["unit_id"], g["score"].astype(float)))[:depth]
                for q, g in ordered.groupby("query_id", sort=True)}

    a, b = top(original), top(shuffled)
    common = sorted(set(a) & set(b))
    if set(a) - set(b):
        notes.append(f"{name}: the shuffled-corpus run lacks {len(set(a) - set(b))} of the {len(a)} questions of "
                     "your run; they are not compared")
    changed = sum(1 for q in common if len(a[q]) != len(b[q]) or any(
        ua != ub or abs(sa - sb) > tolerance for (ua, sa), (ub, sb) in zip(a[q], b[q])))
    nan = float("nan")
    verdict = "LEAK" if changed else ("PASS" if common else "NOT EVALUATED")
    return GateResult(name, 0, nan, nan, nan, nan, nan, nan, verdict, changed if common else -1, len(common),
                      f"questions' top-{depth} rankings"), notes


def paired_gate(per_query: pd.DataFrame, index: str = "image", threshold: float = 0.05, n_boot: int = 2000,
                seed: int = 0, unit_clusters: Mapping[str, str] | None = None,
                probe: tuple[int, int] | None = None) -> GateResult:
    """The gate's decision on one index: the two query sets share their target units, so the test is
    on the per-unit paired difference (caption-derived − blind recall@10, one value per unit that
    has both queries), with a paired bootstrap CI over units. Decision rule (GateResult.rule): LEAK
    when the CI lies entirely above 0 *and* the estimate exceeds threshold — a difference that is
    both real and material; NOT EVALUATED when no unit has both queries. unit_clusters: unit_id ->
    cluster (its document), resampled whole. probe: (units whose input changed, units) from
    ``metadata_probe`` — any change is a LEAK whatever the retrieval difference (it catches partial
    leaks too small to move recall, and works where no query pairs can be built)."""
    changed, probed = probe if probe is not None else (-1, 0)
    part = per_query[per_query["index"] == index]
    wide = part.pivot_table(index="unit_id", columns="query_set", values="recall_10", aggfunc="mean")
    if not {"blind", "caption-derived"} <= set(wide.columns):
        wide = pd.DataFrame(columns=["blind", "caption-derived"])
    wide = wide.dropna(subset=["blind", "caption-derived"])
    if wide.empty:
        nan = float("nan")
        return GateResult(index, 0, nan, nan, nan, nan, nan, threshold, "LEAK" if changed > 0 else "NOT EVALUATED",
                          changed, probed)
    derived, blind = wide["caption-derived"].to_numpy(), wide["blind"].to_numpy()
    cl = None if unit_clusters is None else np.asarray([unit_clusters.get(u, u) for u in wide.index], dtype=object)
    diff, lo, hi, _ = stats.paired_bootstrap(derived, blind, n_boot, rng=np.random.default_rng([seed, 61]), clusters=cl)
    verdict = "LEAK" if (lo > 0 and diff > threshold) or changed > 0 else "PASS"
    result = GateResult(index, len(wide), float(blind.mean()), float(derived.mean()), diff, lo, hi, threshold, verdict,
                        changed, probed)
    if verdict == "PASS" and changed < 0 and result.underpowered:
        # no probe and a retrieval test that could not see even a total leak: nothing was measured
        result = GateResult(index, len(wide), result.blind, result.derived, diff, lo, hi, threshold, "NOT EVALUATED",
                            changed, probed)
    return result
