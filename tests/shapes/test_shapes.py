"""The corpus-shape lane (make test-shapes): every stage on every shape, then every invariant.

Each shape (shape_corpora.SHAPES) is built at test time, run end to end through the runner (every stage
in the test worker's one stage kernel, conftest.stage_kernel, which starts each stage with no earlier
name defined), and audited with lookalike audit's checks; the built-in ci configuration is audited in
the first part of make test (tests/report/test_claims.py), on the run its other tests share. A stage
that fails is itself a violation (the run must still leave its pages, which the audit reads)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lookalike.cli import run
from lookalike.report import audit

from lookalike.data.examples import METRICS, PERIODS
from tests.shapes.shape_corpora import SHAPES

pytestmark = [pytest.mark.slow, pytest.mark.shapes]


def _record(name: str, lines: list[str]) -> None:
    """LOOKALIKE_SHAPES_REPORT=folder: each shape's violations as JSON there (for the lane's table)."""
    folder = os.environ.get("LOOKALIKE_SHAPES_REPORT")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(lines, indent=1), encoding="utf-8")


def _audit_lines(run_dir: Path) -> list[str]:
    from lookalike.cli import audit as audit_cli       # report.audit's invariants and people against the database

    return [v.line() for v in audit_cli.full(run_dir)]


def _table(run_dir: Path, name: str):
    import pandas as pd

    return pd.read_csv(run_dir / "tables" / f"{name}.csv", keep_default_na=False)


def _one_vector(path: Path) -> bool:
    import numpy as np

    with np.load(path, allow_pickle=True) as z:
        return len(np.unique(np.asarray(z["data"]), axis=0)) == 1


def _summary(run_dir: Path) -> str:
    return audit._text_of_html((run_dir / "summary.html").read_text(encoding="utf-8"))


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
    "photos-blind-queries": lambda d: [
        (int(_table(d, "leak_gate").set_index("system").loc["image", "n_pairs"]) > 0,
         "the leak gate's retrieval half runs on the team's own blind queries"),
        (_table(d, "leak_gate").set_index("system").loc["image", "planted_caught"] in ("True", "False"),
         "the retrieval test's power is measured on a caption-index leak planted in the same run"),
        ("underpowered on this corpus" in (d / "html" / "03_leak_ablation.report.html").read_text()
         or "planted in this run" in (d / "html" / "03_leak_ablation.report.html").read_text(),
         "stage 03 says what the planted leak showed")],
    "photos-partial-metadata": lambda d: [
        (set(_table(d, "hard_sets")["method"]) >= {"template", "cluster"},
         "golds with a template rank among it, golds without one among their appearance cluster"),
        (not (_table(d, "hard_sets")["candidates"] == 1).any(), "no hard set is the gold alone")],
    "photos-template-entity": lambda d: [
        (set(_table(d, "hard_sets")["method"]) == {"template"}, "the template stands in for per-axis pools"),
        ("none were found" not in _summary(d), "the summary does not say no look-alikes were found")],
    "photos-no-text": lambda d: [
        (_one_vector(d / "vectors" / "ocr-minilm.npz"),
         "OCR reads nothing: every photo has the same ocr-minilm vector, so its scores tie (to the last bit or "
         "within it) and the tie rule orders the rankings"),
        ((_table(d, "haystack_curve")["corpus_size"] == len(_table(d, "units"))).any(),
         "the haystack curve has its full-corpus point, which the audit scores again from runs_validated/"),
        ("not measurably harder" not in (d / "headlines" / "04_hard_negatives.json").read_text()
         and "at chance against random negatives" in (d / "headlines" / "04_hard_negatives.json").read_text(),
         "stage 04 says ocr-bm25 is at chance rather than giving a hardness statistic about it")],
    "answers-only": lambda d: [("no page judgements" in _summary(d), "the summary says why nothing is scored")],
    "multi-page": lambda d: [((_table(d, "validation_judgements")["role"] == "rest").any(),
                              "the other gold pages are judged alone")],
    "pdf-no-metadata": lambda d: [(set(_table(d, "distractors")["axis"]) <= {"cluster", "random"},
                                   "appearance clusters stand in for templates"),
                                  ("appearance" in _summary(d), "the summary says which distractor method ran")],
    "pdf-full-metadata": lambda d: [(bool(set(_table(d, "distractors")["axis"]) - {"cluster", "random"}),
                                     "per-axis distractors from the template metadata")],
    "plugin-source": lambda d: [
        (len(_table(d, "units")) == 3 * len(PERIODS) * (1 + len(METRICS)),
         "every page the plug-in source listed with an image is a unit"),
        (_table(d, "skipped")["source"].tolist() == ["corpus.source jsonl-pages"]
         and "never-written.png" in _table(d, "skipped")["problem"].iloc[0],
         "the listed page without an image is skipped and named with the source"),
        (set(_table(d, "distractors")["axis"]) - {"cluster", "random"} != set(),
         "the source's template, company, metric and period give per-axis distractors")],
    "external-ties": lambda d: [((d / "runs" / "tied.run").is_file(), "your run is exported"),
                                ("tied" in set(_table(d, "sufficiency")["system"]), "and scored")],
}


def _hard_sets_hold(d: Path) -> list:
    """On every shape: no question inside the hard columns has 5 or fewer candidates, each question
    outside says why, and the verdict is the claim the tables give (the audit re-derives it)."""
    if not (d / "tables" / "hard_sets.csv").is_file():
        return []
    hard = _table(d, "hard_sets")
    inside = hard[hard["in_hard"].astype(str) == "True"]
    outside = hard[hard["in_hard"].astype(str) != "True"]
    return [((inside["candidates"] > 5).all(), "every question in the hard columns has more than 5 candidates"),
            ((outside["reason"] != "").all(), "every question outside the hard columns says why"),
            ((d / "claims.json").is_file(), "the summary's claims are recorded")]


def _expectations(shape: str, run_dir: Path) -> list[str]:
    checks = EXPECT.get(shape, lambda d: [])(run_dir) + _hard_sets_hold(run_dir)
    return [f"shape {shape}: expected: {what}" for ok, what in checks if not ok]


@pytest.fixture(scope="session")
def window():
    """One headless Chromium window for every shape's width check (a browser started per shape took about
    a second and a half each); None where Chromium is not installed."""
    from tests.conftest import chromium_binary, wide_window
    import shutil

    if chromium_binary() is None or shutil.which("chromedriver") is None:
        yield None
        return
    driver = wide_window()
    yield driver
    driver.quit()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_invariant_holds_on_the_shape(shape, tmp_path, window, stage_kernel):
    params = SHAPES[shape](tmp_path / "corpus", seed=11)
    failed = ""
    try:
        # every shape runs its stages in the worker's one kernel: the path lookalike run takes (a kernel per
        # stage) is the ci run's, in the first part of make test (its fixture, nbval and the installed package)
        run_dir = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None, shared_kernel=stage_kernel)
    except run.StageFailed as exc:
        failed = f"stage failed: {exc.stage}: {exc.reason}"
        run_dir = tmp_path / "out" / shape
    lines = ([failed] if failed else []) + _audit_lines(run_dir)
    if shape.startswith("demo-seed-") and not failed:
        lines += _calibration_lines(run_dir)
    if not failed:
        lines += _expectations(shape, run_dir)
        lines += _width_lines(run_dir, window)
        lines += _label_server_lines(run_dir)       # after the audit: it writes to the run's label store
    _record(shape, lines)
    assert not lines, f"{shape}: {len(lines)} violation(s):\n" + "\n".join(lines)


def _width_lines(run_dir: Path, window) -> list[str]:
    """No page of the run and no table box on it scrolls sideways at 1,300 px (where Chromium is installed:
    make setup installs it; without it the browser lane says so and this check is not made)."""
    from tests.conftest import sideways

    if window is None:
        return []
    return [f"width: {line}" for line in sideways(run_dir, driver=window)]


def _calibration_lines(run_dir: Path) -> list[str]:
    """Every effect the generator planted is recovered (tables/planted_effects.csv, ok column)."""
    import pandas as pd

    effects = pd.read_csv(run_dir / "tables" / "planted_effects.csv", keep_default_na=False)
    return [f"calibration: tables/planted_effects.csv: {r.effect}: not recovered (planted {r.planted}, recovered "
            f"{r.recovered} [{r.lo}, {r.hi}]; {r.check})" for r in effects.itertuples() if str(r.ok) != "True"]


def test_peoples_labels_imported_between_two_runs_are_kept_and_used(tmp_path, stage_kernel):
    """A team labels the first run's labelling page; the second run keeps every label they wrote (never
    overwritten by a model or a rule), counts them as people's, and its figures still hold every invariant."""
    import pandas as pd

    from lookalike.cli import labels as labels_cli

    params = SHAPES["pdf-full-metadata"](tmp_path / "corpus", seed=11)
    run_dir = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None, shared_kernel=stage_kernel)
    key = pd.read_csv(run_dir / "labelling" / "key.csv", dtype=str, keep_default_na=False)
    judged = {tuple(line.split()[::2][:2]) for line in (tmp_path / "corpus" / "q.qrels").read_text().splitlines()}
    chosen = key[[(q, u) not in judged for q, u in zip(key["query_id"], key["unit_id"])]].head(8)   # pairs nobody judged yet
    people = ["irrelevant", "supporting", "sufficient", "irrelevant"] * 2      # what the team wrote
    export = tmp_path / "export.csv"
    pd.DataFrame({"pair_id": chosen["pair_id"], "label": people, "note": "checked by hand",
                  "time": "2026-12-03T10:00:00+00:00"}).to_csv(export, index=False)
    assert labels_cli.main(["import", str(export), "--run-dir", str(run_dir)]) == 0
    run_dir = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None, shared_kernel=stage_kernel)
    current = pd.read_csv(run_dir / "tables" / "labels_current.csv", dtype=str, keep_default_na=False)
    mine = current.merge(chosen[["query_id", "unit_id"]].assign(people=people), on=["query_id", "unit_id"])
    assert len(mine) == 8
    assert (mine["label"] == mine["people"]).all(), mine[["query_id", "unit_id", "label", "people", "source"]]
    assert (mine["source"] == "human").all()
    lines = _audit_lines(run_dir)
    _record("labels-between-runs", lines)
    assert not lines, "\n".join(lines)


def _label_server_lines(run_dir: Path) -> list[str]:
    """The team label server on the shape's run (the judge door on): it loads the pool, gives one
    person a blind queue and one the metadata pool's, takes their labels and exports the blind one's
    to the store; with nothing pooled it says nothing is left to label."""
    from starlette.testclient import TestClient

    from lookalike.judging import server, team
    from lookalike.judging.labeldb import LabelDB
    from lookalike.judging.store import LabelStore

    lines = []
    try:
        loaded = server.load_run(run_dir)
        db = LabelDB(run_dir / "labels" / "team-check.sqlite")
        c = TestClient(server.create_app(loaded, db, server.Settings(door=True)))
        pool = _table(run_dir, "pool")
        if len(loaded.pairs) != len(pool):
            lines.append(f"label server: {len(loaded.pairs)} pairs served of {len(pool)} pooled")
        done = {}
        for name in ("metadata", "blind"):
            auth = {"Authorization": f"Bearer {db.add_person(name, name)[1]}"}
            who = c.get("/api/me", headers=auth).json()
            done[who["pool"]] = 0
            for i in range(3):
                got = c.get("/api/next", headers=auth).json()
                if got["done"]:
                    break
                keys = set(got) - {"done", "mine", "pairs", "pair_id", "question"}
                if keys != ({"metadata"} if who["pool"] == "metadata" else set()):
                    lines.append(f"label server: the {who['pool']} pool was sent {sorted(keys)}")
                if c.get(f"/api/image/{got['pair_id']}", headers=auth).status_code != 200:
                    lines.append(f"label server: pair {got['pair_id']}'s image was not served")
                r = c.post("/api/label", headers=auth,
                           json={"pair_id": got["pair_id"], "label": "irrelevant", "request_id": f"{name}-shape-{i:03d}"})
                if r.status_code != 200:
                    lines.append(f"label server: a label was refused: {r.text}")
                done[who["pool"]] += 1
        if set(done) != {"blind", "metadata"}:
            lines.append(f"label server: the pools filled as {done}")
        if len(pool) and min(done.values()) == 0:
            lines.append("label server: somebody was given nothing to label from a non-empty pool")
        sent = team.export_to_store(db, LabelStore(run_dir / "labels" / "store.jsonl"))
        if (sent["written"], sent["metadata_pool"]) != (done.get("blind", 0), done.get("metadata", 0)):
            lines.append(f"label server: export wrote {sent} after {done}")
        lead = {"Authorization": f"Bearer {db.add_person('lead', 'blind', lead=True)[1]}"}
        for page in ("/progress", "/agreement"):
            if c.get(page, headers=lead).status_code != 200:
                lines.append(f"label server: {page} did not render")
    except Exception as exc:       # noqa: BLE001 (a crash on a shape is a violation, said in words)
        lines.append(f"label server: {type(exc).__name__}: {exc}")
    return lines


def test_a_team_labels_with_the_door_on_between_two_runs(tmp_path, stage_kernel):
    """Photos with captions: four scripted people, two blind and two who see file names and captions,
    label the whole pool on a server started with --door while the params leave labels.door off; the
    second run (the same params) takes the door from the label database, exports their labels, keeps
    the metadata pool's out of the qrels, shows the judge door's people row, and holds every invariant."""
    import pandas as pd
    from starlette.testclient import TestClient

    from lookalike.judging import server
    from lookalike.judging.judges import content_words
    from lookalike.judging.labeldb import LabelDB

    params = SHAPES["photos-captions"](tmp_path / "corpus", seed=11)       # labels.door stays off in the params
    run_dir = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None, shared_kernel=stage_kernel)
    gold = {tuple(line.split()[::2][:2]) for line in (tmp_path / "corpus" / "q.qrels").read_text().splitlines()}
    loaded = server.load_run(run_dir)
    db = LabelDB(run_dir / "labels" / "labels.sqlite")
    settings, _ = server.settings_from(server.run_params(run_dir), db, door=True)      # labels serve --door
    c = TestClient(server.create_app(loaded, db, settings))
    pair = loaded.pairs.set_index("pair_id")
    pools = {"p1": "blind", "p2": "metadata", "p3": "blind", "p4": "metadata"}
    auth = {n: {"Authorization": f"Bearer {db.add_person(n, pool)[1]}"} for n, pool in pools.items()}
    blind_labels = {}
    for name, pool in pools.items():
        i = 0
        while not (got := c.get("/api/next", headers=auth[name]).json())["done"]:
            q, u = pair.loc[got["pair_id"], ["query_id", "unit_id"]]
            label = "sufficient" if (q, u) in gold else "irrelevant"
            # scripted: who sees the caption calls a page supporting when it shares a word with the question
            if pool == "metadata" and label == "irrelevant" and \
                    content_words(got["question"]) & content_words(" ".join(got["metadata"].values())):
                label = "supporting"
            if pool == "blind":
                blind_labels[(q, u)] = label
            r = c.post("/api/label", headers=auth[name],
                       json={"pair_id": got["pair_id"], "label": label, "request_id": f"{name}-{i:05d}"})
            assert r.status_code == 200, r.text
            i += 1
    assert len(blind_labels) == len(loaded.pairs)
    run_dir = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None, shared_kernel=stage_kernel)
    summary = _table(run_dir, "judge_door_summary")
    people = summary[summary["judge"].str.startswith("people (1 blind, 1 seeing")]    # p1 and p2 labelled each pool's whole share
    assert len(people) == 1, summary["judge"].tolist()
    row = people.iloc[0]
    assert int(row["n_pairs"]) == len(loaded.pairs) and int(row["lost"]) == 0
    assert int(row["relevant_with_metadata"]) == int(row["relevant_blind"]) + int(row["gained"])
    if int(row["gained"]):
        assert float(row["gained_with_term"]) == 1.0
    current = _table(run_dir, "labels_current")
    theirs = current[current["judge"].str.startswith("annotator:")]
    assert len(theirs) and all(blind_labels[(q, u)] == lab for q, u, lab in
                               zip(theirs["query_id"], theirs["unit_id"], theirs["label"]))
    assert set(theirs["judge"]) <= {f"annotator:{n}" for n, p in pools.items() if p == "blind"}
    assert len(pd.read_csv(run_dir / "tables" / "annotator_agreement.csv"))
    summary_text = _summary(run_dir)
    assert "People, overall (blind pool): " in summary_text and "people, overall (metadata pool): " in summary_text
    assert "the judge door with people: relevant " in summary_text
    notebook = (run_dir / "notebooks" / "06_judge_pool.ipynb").read_text(encoding="utf-8")
    assert "labels.door is off in the params; the label database says on" in notebook
    lines = _audit_lines(run_dir)
    _record("team-door-between-runs", lines)
    assert not lines, "\n".join(lines)
