"""lookalike's public Python API, re-exported by ``import lookalike``.

    import lookalike
    qrels = lookalike.read_qrels("qrels.txt")
    report = lookalike.compare(qrels, {"bm25": "bm25.run", "colpali": "colpali.run"}, ["ndcg@10", "map"])
    report.to_dataframe(); report.save("comparison.html")
    run = lookalike.open_run("outputs/demo"); run.table("headline")

The names here keep their meaning across releases; everything else in the package may move.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Sequence

import pandas as pd

from lookalike.eval.compare import Report, compare, format_p
from lookalike.eval import measures as _measures
from lookalike.eval.measures import Measure, MeasureError
from lookalike.eval.metrics import Evaluation, evaluate
from lookalike.eval.ranking import Qrels, Run
from lookalike.eval.trec import TrecFormatError

__all__ = ["Qrels", "Run", "read_qrels", "read_run", "parse_measure", "evaluate", "Evaluation", "compare", "Report",
           "open_run", "FinishedRun", "format_p", "Measure", "MeasureError", "TrecFormatError"]


def parse_measure(spec: str) -> Measure:
    """One measure in any spelling lookalike accepts (trec_eval 'ndcg_cut.10', ir_measures 'nDCG@10',
    ranx 'ndcg@10'); a spec naming several ('P.5,10', 'nDCG@10 P@5') is refused with the names."""
    found = _measures.parse([spec])
    if len(found) != 1:
        raise MeasureError(f"{spec!r} names {len(found)} measures ({', '.join(map(str, found))}); "
                           "parse_measure takes one")
    return found[0]


def read_qrels(path: Path | str) -> Qrels:
    """A TREC qrels file (query_id iteration unit_id relevance) as Qrels; errors name the file and line."""
    return Qrels.read(path)


def read_run(path: Path | str, name: str | None = None) -> Run:
    """A TREC run file as a Run in trec_eval's order; its name is the file's tag unless given."""
    return Run.read(path, name=name)


class FinishedRun:
    """A finished lookalike run folder, read back: its tables as frames, its runs and qrels, its params.

    run.tables            the table names (tables/NAME.csv)
    run.table(NAME)       one table (also run[NAME])
    run.runs("runs")      system -> Run, from runs/ (or "runs_validated")
    run.qrels("evidence") the judgements in qrels/NAME.qrels as Qrels
    run.params, run.manifest, run.path, run.summary (summary.html's path)
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        manifest = self.path / "manifest.json"
        if not manifest.is_file():
            raise FileNotFoundError(f"{self.path}: not a finished lookalike run (no manifest.json; "
                                    "`lookalike run PARAMS` writes one when every stage has run)")
        self.manifest = json.loads(manifest.read_text(encoding="utf-8"))
        self.params = self.manifest.get("params", {})
        self.summary = self.path / "summary.html"

    def __repr__(self) -> str:
        return f"FinishedRun({str(self.path)!r}: {len(self.tables)} tables, finished {self.manifest.get('finished', '?')})"

    @property
    def tables(self) -> list[str]:
        """The names of the run's tables (tables/<name>.csv), sorted."""
        return sorted(p.stem for p in (self.path / "tables").glob("*.csv"))

    def table(self, name: str) -> pd.DataFrame:
        """One table of the run as a DataFrame (run["name"] says the same); KeyError names the tables it has."""
        path = self.path / "tables" / f"{name}.csv"
        if not path.is_file():
            raise KeyError(f"{path}: no such table in this run; it has {', '.join(self.tables) or 'none'}")
        return pd.read_csv(path)

    __getitem__ = table

    def runs(self, folder: str = "runs") -> dict[str, Run]:
        """Each system's ranking in a folder of the run (runs/: questions as generated; runs_validated/,
        runs_hard/), by system name."""
        return {p.stem: Run.read(p, name=p.stem) for p in sorted((self.path / folder).glob("*.run"))}

    def qrels(self, name: str = "evidence") -> Qrels:
        """One of the run's judgement files (qrels/<name>.qrels: evidence, evidence_validated, labels)."""
        path = self.path / "qrels" / f"{name}.qrels"
        if not path.is_file():
            have = sorted(p.stem for p in (self.path / "qrels").glob("*.qrels"))
            raise KeyError(f"{path}: no such qrels in this run; it has {', '.join(have) or 'none'}")
        return Qrels.read(path)

    def compare(self, measures: Sequence[str] | None = None, baseline: str | None = None, folder: str = "runs",
                qrels: str = "evidence", **kwargs) -> Report:
        """This run's systems compared on its own judgements (default: runs/ against qrels/evidence.qrels,
        every judged question counted, as the first look does)."""
        kwargs.setdefault("complete", True)
        return compare(self.qrels(qrels), self.runs(folder), measures, baseline, **kwargs)


def open_run(path: Path | str) -> FinishedRun:
    """A finished run folder (outputs/NAME) read back; see FinishedRun."""
    return FinishedRun(path)
