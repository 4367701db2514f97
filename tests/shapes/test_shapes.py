"""The corpus-shape lane (make test-shapes): every stage on every shape, then every invariant.

Each shape (shape_corpora.SHAPES) is built at test time, run end to end with lookalike run, and
audited with lookalike audit's checks; the built-in ci configuration is audited too. A stage that
fails is itself a violation (the run must still leave its pages, which the audit reads)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lookalike import stages as stage_modules
from lookalike.cli import run
from lookalike.report import audit as A

from shape_corpora import SHAPES

pytestmark = [pytest.mark.slow, pytest.mark.shapes]


def _record(name: str, lines: list[str]) -> None:
    """LOOKALIKE_SHAPES_REPORT=folder: each shape's violations as JSON there (for the lane's table)."""
    folder = os.environ.get("LOOKALIKE_SHAPES_REPORT")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(lines, indent=1), encoding="utf-8")


def _audit_lines(run_dir: Path) -> list[str]:
    return [v.line() for v in A.audit(run_dir, list(stage_modules.STAGES))]


def _table(run_dir: Path, name: str):
    import pandas as pd

    return pd.read_csv(run_dir / "tables" / f"{name}.csv", keep_default_na=False)


def _summary(run_dir: Path) -> str:
    return A._text_of_html((run_dir / "summary.html").read_text(encoding="utf-8"))


# what each shape is there to exercise, checked on its run (a shape that stopped exercising it would pass
# the invariants by doing nothing)
EXPECT = {
    "photos-captions": lambda d: [
        (len(_table(d, "questions_validated")) == 14, "the 14 qrels-only questions are scored"),
        ((d / "labelling" / "label.html").is_file(), "the labelling page exists"),
        (_table(d, "question_validation")["note"].str.contains("distractor check not run: answer-string needs an answer").all(),
         "each qrels-only question says the distractor check did not run"),
        ("NOT EVALUATED" in (d / "html" / "03_leak_ablation.report.html").read_text()
         or "not evaluated" in (d / "headlines" / "03_leak_ablation.json").read_text().lower(),
         "the leak gate's retrieval half is not evaluated without blind queries")],
    "answers-only": lambda d: [("no page judgements" in _summary(d), "the summary says why nothing is scored")],
    "multi-page": lambda d: [((_table(d, "validation_judgements")["role"] == "rest").any(),
                              "the other gold pages are judged alone")],
    "pdf-no-metadata": lambda d: [(set(_table(d, "distractors")["axis"]) <= {"cluster", "random"},
                                   "appearance clusters stand in for templates"),
                                  ("appearance" in _summary(d), "the summary says which distractor method ran")],
    "pdf-full-metadata": lambda d: [(bool(set(_table(d, "distractors")["axis"]) - {"cluster", "random"}),
                                     "per-axis distractors from the template metadata")],
    "external-ties": lambda d: [((d / "runs" / "tied.run").is_file(), "your run is exported"),
                                ("tied" in set(_table(d, "sufficiency")["system"]), "and scored")],
}


def _expectations(shape: str, run_dir: Path) -> list[str]:
    return [f"shape {shape}: expected: {what}" for ok, what in EXPECT.get(shape, lambda d: [])(run_dir) if not ok]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_invariant_holds_on_the_shape(shape, tmp_path):
    params = SHAPES[shape](tmp_path / "corpus", seed=11)
    failed = ""
    try:
        run_dir = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None)
    except run.StageFailed as exc:
        failed = f"stage failed: {exc.stage}: {exc.reason}"
        run_dir = tmp_path / "out" / shape
    lines = ([failed] if failed else []) + _audit_lines(run_dir)
    if shape.startswith("demo-seed-") and not failed:
        lines += _calibration_lines(run_dir)
    if not failed:
        lines += _expectations(shape, run_dir)
    _record(shape, lines)
    assert not lines, f"{shape}: {len(lines)} violation(s):\n" + "\n".join(lines)


def _calibration_lines(run_dir: Path) -> list[str]:
    """Every effect the generator planted is recovered (tables/planted_effects.csv, ok column)."""
    import pandas as pd

    effects = pd.read_csv(run_dir / "tables" / "planted_effects.csv", keep_default_na=False)
    return [f"calibration: tables/planted_effects.csv: {r.effect}: not recovered (planted {r.planted}, recovered "
            f"{r.recovered} [{r.lo}, {r.hi}]; {r.check})" for r in effects.itertuples() if str(r.ok) != "True"]


def test_every_invariant_holds_on_the_ci_configuration(tmp_path):
    from conftest import REPO

    run_dir = run.execute(REPO / "params" / "ci.yaml", out_root=tmp_path / "out", log=lambda *_: None)
    lines = _audit_lines(run_dir) + _calibration_lines(run_dir)
    _record("ci", lines)
    assert not lines, "ci: " + "\n".join(lines)


def test_peoples_labels_imported_between_two_runs_are_kept_and_used(tmp_path):
    """A team labels the first run's labelling page; the second run keeps every label they wrote (never
    overwritten by a model or a rule), counts them as people's, and its figures still hold every invariant."""
    import pandas as pd

    from lookalike.cli import labels as labels_cli

    params = SHAPES["pdf-full-metadata"](tmp_path / "corpus", seed=11)
    run_dir = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None)
    key = pd.read_csv(run_dir / "labelling" / "key.csv", dtype=str, keep_default_na=False)
    judged = {tuple(line.split()[::2][:2]) for line in (tmp_path / "corpus" / "q.qrels").read_text().splitlines()}
    chosen = key[[(q, u) not in judged for q, u in zip(key["query_id"], key["unit_id"])]].head(8)   # pairs nobody judged yet
    people = ["irrelevant", "supporting", "sufficient", "irrelevant"] * 2      # what the team wrote
    export = tmp_path / "export.csv"
    pd.DataFrame({"pair_id": chosen["pair_id"], "label": people, "note": "checked by hand",
                  "time": "2026-12-03T10:00:00+00:00"}).to_csv(export, index=False)
    assert labels_cli.main(["import", str(export), "--run-dir", str(run_dir)]) == 0
    run_dir = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None)
    current = pd.read_csv(run_dir / "tables" / "labels_current.csv", dtype=str, keep_default_na=False)
    mine = current.merge(chosen[["query_id", "unit_id"]].assign(people=people), on=["query_id", "unit_id"])
    assert len(mine) == 8
    assert (mine["label"] == mine["people"]).all(), mine[["query_id", "unit_id", "label", "people", "source"]]
    assert (mine["source"] == "human").all()
    lines = _audit_lines(run_dir)
    _record("labels-between-runs", lines)
    assert not lines, "\n".join(lines)
