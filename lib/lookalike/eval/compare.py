"""Several runs compared on the same qrels: ``compare(qrels, runs, measures) -> Report``.

A Report holds one row per (measure, system): the mean over the queries every run was scored on,
its bootstrap 95% interval, and — for every system but the baseline — the paired difference from
the baseline with its interval, the paired randomisation test's p-value, that p-value adjusted by
Holm over the systems compared on the same measure (one family per measure), and the count of
queries the system wins, ties and loses against the baseline.

The statistics are lookalike.eval.stats' (comparison_table): every system draws the same
resamples of the same queries, so adding a run moves no other run's interval; with ``clusters``
(query -> cluster, e.g. the document a question was written from) whole clusters are resampled and
flipped together, and the report says so.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.eval import measures as measures_mod
from lookalike.eval import stats
from lookalike.eval.metrics import evaluate
from lookalike.eval.ranking import Run, as_qrels, as_run

DEFAULT_MEASURES = ("ndcg_cut.10", "map", "recip_rank", "P.5", "recall.100")
TIE = 1e-12            # per-query values closer than this are a tie (sums of floats, not judgements)

COLUMNS = ["measure", "system", "n", "mean", "ci_lo", "ci_hi", "baseline", "delta", "delta_lo", "delta_hi",
           "p_randomisation", "p_holm", "wins", "ties", "losses"]


def format_p(p: float) -> str:
    """A p-value as people read it: three decimals, '< 0.001' below that, blank when there is none."""
    if p is None or not np.isfinite(p):
        return ""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


@dataclass
class Report:
    """The comparison of several runs (see the module docstring). ``table`` has COLUMNS."""

    table: pd.DataFrame
    measures: list[str]
    systems: list[str]
    baseline: str
    n_queries: int
    interval: str
    per_query: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    notes: list[str] = field(default_factory=list)

    def to_dataframe(self) -> pd.DataFrame:
        """The table at full precision (a copy): one row per measure and system."""
        return self.table.copy()

    def wide(self) -> pd.DataFrame:
        """Systems as rows, one column per measure: 'mean [lo, hi]' text, the baseline's row first."""
        cells = {}
        for m in self.measures:
            part = self.table[self.table["measure"] == m].set_index("system")
            cells[m] = [_cell(part.loc[s]) for s in self.systems]
        return pd.DataFrame(cells, index=pd.Index(self.systems, name="system"))

    def _display(self) -> pd.DataFrame:
        t = self.table
        return pd.DataFrame({
            "measure": t["measure"], "system": t["system"], "n": t["n"].astype(int),
            "mean [95% CI]": [f"{m:.4f} [{lo:.4f}, {hi:.4f}]" for m, lo, hi in zip(t["mean"], t["ci_lo"], t["ci_hi"])],
            f"Δ vs {self.baseline} [95% CI]": ["" if s == self.baseline else f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"
                                              for s, d, lo, hi in zip(t["system"], t["delta"], t["delta_lo"],
                                                                      t["delta_hi"])],
            "p (Holm)": [format_p(p) for p in t["p_holm"]],
            "win / tie / loss": ["" if s == self.baseline else f"{int(w)} / {int(ti)} / {int(lo)}"
                                 for s, w, ti, lo in zip(t["system"], t["wins"], t["ties"], t["losses"])],
        })

    def caption(self) -> str:
        """What the figures rest on, in words."""
        return (f"{len(self.systems)} runs on the {self.n_queries} queries all of them were scored on; "
                f"{self.interval}; Δ is each run minus {self.baseline}; p: paired randomisation test, "
                f"Holm-adjusted over the runs on each measure; win / tie / loss counts queries against "
                f"{self.baseline}.")

    def __str__(self) -> str:
        return self._display().to_string(index=False) + "\n" + self.caption() + "".join(
            f"\nnote: {n}" for n in self.notes)

    def _repr_html_(self) -> str:
        body = self._display().to_html(index=False, escape=True, border=0)
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return f"<div>{body}<p>{html.escape(self.caption())}</p>{notes}</div>"

    def to_latex(self) -> str:
        """A booktabs table (the packages it needs: booktabs)."""
        d = self._display()
        esc = {"&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$", "{": r"\{", "}": r"\}",
               "Δ": r"$\Delta$", "<": r"$<$", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}

        def tex(s) -> str:
            return "".join(esc.get(ch, ch) for ch in str(s))

        lines = [r"\begin{tabular}{" + "l" * 2 + "r" * (d.shape[1] - 2) + "}", r"\toprule",
                 " & ".join(tex(c) for c in d.columns) + r" \\", r"\midrule"]
        lines += [" & ".join(tex(v) for v in row) + r" \\" for row in d.itertuples(index=False)]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """The comparison as JSON: baseline, systems, measures, n, the interval's method, notes and one object per
        row (missing values null)."""
        rows = [{k: (None if v is pd.NA or (isinstance(v, float) and not np.isfinite(v)) else
                     int(v) if isinstance(v, (np.integer,)) else v) for k, v in r.items()}
                for r in self.table.astype(object).to_dict("records")]
        return json.dumps({"baseline": self.baseline, "systems": self.systems, "measures": self.measures,
                           "n_queries": self.n_queries, "interval": self.interval, "notes": self.notes,
                           "rows": rows}, indent=1)

    def save(self, path: Path | str) -> Path:
        """Write the report; the suffix decides how: .csv (full precision), .json, .tex or .html."""
        path = Path(path)
        writers = {".csv": lambda: self.table.to_csv(index=False, lineterminator="\n"), ".json": self.to_json,
                   ".tex": self.to_latex,
                   ".html": lambda: "<!doctype html><meta charset='utf-8'>" + self._repr_html_() + "\n"}
        if path.suffix not in writers:
            raise ValueError(f"{path}: a report is saved as {', '.join(writers)} (got {path.suffix or 'no suffix'!r})")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(writers[path.suffix](), encoding="utf-8")
        return path


def _cell(row) -> str:
    return f"{row['mean']:.4f} [{row['ci_lo']:.4f}, {row['ci_hi']:.4f}]"


def _named_runs(runs) -> dict[str, Run]:
    """name -> Run from a mapping (name -> run, frame, dict or path) or a sequence (Runs, paths)."""
    if isinstance(runs, (str, Path, Run)) or runs is None or not isinstance(runs, (Mapping, Sequence)):
        raise TypeError("runs: expected a mapping name -> run (a Run, a path to a TREC run file, a frame or a dict) "
                        f"or a list of Runs or paths, at least two; got {type(runs).__name__}")
    out: dict[str, Run] = {}
    items = runs.items() if isinstance(runs, Mapping) else [(None, r) for r in runs]
    for i, (name, r) in enumerate(items):
        where = f"runs[{name!r}]" if name is not None else f"runs[{i}]"
        if isinstance(r, (str, Path)):
            run = as_run(r, where, name=name)
            if name is None and run.name in out:        # two files with one tag: tell them apart by file
                run.name = Path(r).name
        else:
            run = as_run(r, where, name=name or f"run{len(out) + 1}")
        key = str(name) if name is not None else run.name
        if key in out:
            raise ValueError(f"two runs are named {key!r}: name them (pass a mapping name -> run)")
        out[key] = run
    if len(out) < 2:
        raise ValueError(f"compare needs at least two runs, got {len(out)}")
    return out


def compare(qrels, runs, measures: Sequence[str] | None = None, baseline: str | None = None, *, level: int = 1,
            complete: bool = False, clusters: pd.Series | None = None, n_boot: int = 2000, n_perm: int = 10000,
            seed: int = 0) -> Report:
    """Compare runs on qrels: per-run means with bootstrap CIs, paired tests against a baseline with Holm.

    qrels: Qrels, a path, a long frame or a dict. runs: a mapping name -> run (Run, path, frame or
    dict) or a sequence of Runs / paths (named by their tag). measures: any spelling
    lookalike.eval.measures accepts (default DEFAULT_MEASURES); measures that are not means over
    queries (num_q, gm_map, the set-level counts) are refused. baseline: a run's name (default the
    first run). level / complete: as in evaluate (trec_eval -l / -c). clusters: query -> cluster
    for clustered intervals and tests. n_boot / n_perm: bootstrap and randomisation resamples, at least
    stats.MIN_RESAMPLES (200) each. Anything else than these types is a TypeError naming the argument.
    """
    n_boot, n_perm = stats.check_resamples(n_boot, "n_boot"), stats.check_resamples(n_perm, "n_perm")
    Q = as_qrels(qrels, "qrels")
    named = _named_runs(runs)
    baseline = next(iter(named)) if baseline is None else str(baseline)
    if baseline not in named:
        raise ValueError(f"baseline {baseline!r} is not one of the runs: {', '.join(named)}")
    systems = [baseline] + [s for s in named if s != baseline]      # the baseline's row first, then as given
    wanted = measures_mod.parse(list(measures) if measures else list(DEFAULT_MEASURES))
    names = [str(m) for m in wanted]
    not_means = [str(m) for m in wanted if m.aggregation != "mean"]
    if not_means:
        raise measures_mod.MeasureError(
            f"compare takes measures averaged over queries; {', '.join(not_means)} "
            f"{'is a count or a geometric mean' if len(not_means) == 1 else 'are counts or geometric means'} "
            "of the whole set (evaluate one run at a time for it)")
    per_query = {s: evaluate(Q, r, names, level=level, complete=complete).per_query for s, r in named.items()}
    shared = sorted(set.intersection(*(set(p.index) for p in per_query.values())))
    notes = []
    for s, p in per_query.items():
        if len(p) > len(shared):
            notes.append(f"{s}: {len(p) - len(shared)} of its {len(p)} scored queries are left out, "
                         "because another run has no ranking for them (use complete=True / -c to score "
                         "missing rankings as empty)")
    if not shared:
        raise ValueError("no query was scored for every run: nothing to compare")
    rows = []
    for m in names:
        values = {s: per_query[s].loc[shared, m] for s in systems}
        t = stats.comparison_table(values, baseline=baseline, n_boot=n_boot, n_perm=n_perm, seed=seed,
                                   clusters=clusters).set_index("system")
        base = values[baseline].to_numpy()
        for s in systems:
            row = t.loc[s]
            d = values[s].to_numpy() - base
            rows.append(dict(measure=m, system=s, n=int(row["n"]), mean=row["mean"], ci_lo=row["ci_lo"],
                             ci_hi=row["ci_hi"], baseline=baseline, delta=row["delta"], delta_lo=row["delta_lo"],
                             delta_hi=row["delta_hi"], p_randomisation=row["p_randomisation"], p_holm=row["p_holm"],
                             wins=np.nan if s == baseline else int(np.sum(d > TIE)),
                             ties=np.nan if s == baseline else int(np.sum(np.abs(d) <= TIE)),
                             losses=np.nan if s == baseline else int(np.sum(d < -TIE))))
    table = pd.DataFrame(rows, columns=COLUMNS).astype({"wins": "Int64", "ties": "Int64", "losses": "Int64"})
    return Report(table=table, measures=names, systems=systems, baseline=baseline, n_queries=len(shared),
                  interval=stats.interval_words(clusters), per_query=per_query, notes=notes)
