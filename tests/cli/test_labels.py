"""The lead's commands around a round of labelling: ``labels add`` (a person, their pool, a personal
token printed once), ``labels plan`` (the cost before the first label), and the round's settings kept
in the label database (the params seed a new one; a server flag changes it; a later params value
that differs is said, and the database's is used)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import make_label_run
from lookalike.cli import labels as labels_cli
from lookalike.judging import server, team
from lookalike.judging.labeldb import LabelDB, LabelDBError


@pytest.fixture
def run_dir(tmp_path):
    return make_label_run(tmp_path / "run", questions=4, per_question=3)


def test_labels_add_prints_a_token_once_that_signs_that_person_in(run_dir, capsys):
    assert labels_cli.main(["add", str(run_dir), "Ana", "--pool", "blind", "--lead"]) == 0
    out = capsys.readouterr().out
    token = out.rsplit(": ", 1)[1].strip()
    db = LabelDB(run_dir / "labels" / "labels.sqlite")
    assert db.person_by_token(token) == {**db.annotator("Ana"), "lead": True}
    assert token not in (run_dir / "labels" / "labels.sqlite").read_bytes().decode("latin-1")
    assert labels_cli.main(["add", str(run_dir), "Ana", "--pool", "blind"]) == 2
    assert "already in this label database" in capsys.readouterr().out
    assert labels_cli.main(["add", str(run_dir), "Ana", "--pool", "blind", "--new-token"]) == 0
    fresh = capsys.readouterr().out.rsplit(": ", 1)[1].strip()
    with pytest.raises(LabelDBError):
        db.person_by_token(token)
    assert db.person_by_token(fresh)["name"] == "Ana"
    assert labels_cli.main(["add", str(run_dir), "Ben", "--pool", "metadata", "--adjudicator"]) == 2
    assert "an adjudicator is blind" in capsys.readouterr().out
    assert labels_cli.main(["add", str(run_dir), "Cy", "--pool", "metadata"]) == 0
    assert "judge door only" in capsys.readouterr().out
    assert db.settings() == {"per_pair": 1, "door": True}      # seeded by the params, the door turned on by Cy


def test_the_database_holds_the_rounds_settings_and_the_params_only_seed_it(run_dir):
    params = server.run_params(run_dir)
    db = LabelDB(run_dir / "labels" / "labels.sqlite")
    settings, notes = server.settings_from(params, db)
    assert (settings.per_pair, settings.door, notes) == (1, False, [])
    settings, notes = server.settings_from(params, db, per_pair=2, door=True)       # labels serve --per-pair 2 --door
    assert (settings.per_pair, settings.door) == (2, True)
    assert notes == ["changed: per_pair 1 → 2 (lookalike labels serve)", "changed: door false → true (lookalike labels serve)"]
    settings, notes = server.settings_from(params, db)                                # the params again: the database wins
    assert (settings.per_pair, settings.door) == (2, True)
    assert notes == ["the run's params say labels.per_pair 1; the label database says 2, which is what this round runs with",
                     "the run's params say labels.door off; the label database says on, which is what this round runs with"]
    assert server.settings_from(params, None, per_pair=3)[0].per_pair == 3        # no database: params and flags


def test_export_reads_per_pair_and_pools_from_the_database(run_dir, capsys):
    db = LabelDB(run_dir / "labels" / "labels.sqlite")
    server.settings_from(server.run_params(run_dir), db, per_pair=2, door=True)
    assert labels_cli.main(["export", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "labels.per_pair 1; the label database says 2" in out
    assert labels_cli.main(["export", str(run_dir)]) == 0
    progress = pd.read_csv(run_dir / "labels" / "progress_per_question.csv")
    assert (progress["slots"] == progress["pairs"] * 2 * 2).all()                   # 2 per pair in each of 2 pools


def test_a_plan_gives_labels_people_hours_and_the_interval_they_buy():
    pairs = pd.DataFrame({"pair_id": [f"p{i}" for i in range(100)], "query_id": [f"q{i % 10}" for i in range(100)]})
    plan = team.plan(pairs, people=4, per_pair=2, door=True, door_share=0.5)
    assert plan["feasible"]
    lines = plan["lines"]
    assert lines[0] == ("100 pairs for 10 questions × 2 label(s) per pair × 2 pools (the judge door) = 400 labels; "
                        "2 blind, 2 metadata of 4 people")
    assert lines[1] == "each person labels about 100 (blind pool), 100 (metadata pool)"
    assert lines[2].startswith("pace not measured yet") and "6.7 person-hours, about 1.7 hours with everyone at once at " \
                                                            "60 labels per hour" in lines[2]
    assert "±0.096 (Wilson 95% at 0.5, the widest" in lines[3] and "to ±0.196 at worst" in lines[3]
    machine = pd.DataFrame({"pair_id": pairs["pair_id"], "judge": "answer-string",
                            "label": ["sufficient"] * 10 + ["irrelevant"] * 90})
    labels = pd.DataFrame({"pair_id": ["p0", "p1", "p2"], "kind": "label", "retracted": 0, "seconds": [20.0, 30.0, 40.0],
                           "annotator": "a", "time": "2026-12-06T10:00:00+00:00"})
    lines = team.plan(pairs, 4, 2, True, 0.5, labels, machine)["lines"]
    assert lines[2].startswith("at 120 labels per hour per person (measured: the median time on screen of 3 labels")
    assert "3.3 person-hours, about 0.8 hours with everyone at once" in lines[2]
    assert "0.10, the share answer-string pre-labelled relevant" in lines[3]
    short = team.plan(pairs, people=3, per_pair=2, door=True, door_share=0.5)
    assert not short["feasible"] and "the blind pool has 1" in short["lines"][-1]


def test_labels_plan_on_a_run(run_dir, capsys):
    assert labels_cli.main(["plan", str(run_dir), "--people", "2", "--per-pair", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("12 pairs for 4 questions × 2 label(s) per pair = 24 labels; 2 blind of 2 people")
    assert labels_cli.main(["plan", str(run_dir), "--people", "2", "--per-pair", "2", "--door"]) == 1
    assert "not feasible" in capsys.readouterr().out


def test_the_audit_checks_peoples_figures_against_the_label_database(run_dir):
    from lookalike.judging import door as JD

    db = LabelDB(run_dir / "labels" / "labels.sqlite")
    db.add_pairs(server.load_run(run_dir).pairs)
    for name, pool in (("b1", "blind"), ("b2", "blind"), ("m1", "metadata"), ("m2", "metadata")):
        db.add_person(name, pool)
        i = 0
        while (got := db.next_pair(name, 2, 60, 0, True)) is not None:
            label = "supporting" if name == "m2" and i % 2 else ("sufficient" if name == "b2" and i == 0 else "irrelevant")
            db.submit(name, got.pair_id, label, "", f"{name}-{i:05d}", 2, True)
            i += 1
    params = server.run_params(run_dir)
    tables = run_dir / "tables"
    team.agreement_table(db.labels(), seed=0).to_csv(tables / "annotator_agreement.csv", index=False)
    _, door, _ = JD.people_door(db.labels(), pd.read_csv(tables / "questions_validated.csv"),
                                pd.read_csv(tables / "units.csv", keep_default_na=False))
    door.to_csv(tables / "judge_door_summary.csv", index=False)
    assert team.check_run(run_dir, params) == []
    edited = door.assign(gained=door["gained"] + 1)
    edited.to_csv(tables / "judge_door_summary.csv", index=False)
    found = team.check_run(run_dir, params)
    assert [f[1] for f in found] == ["the people row: gained"] and "labels changed after stage 06" in found[0][2]
    door.to_csv(tables / "judge_door_summary.csv", index=False)
    first = db.labels().iloc[0]
    db.undo(first["annotator"], "undo-after-stage-06", 60)           # a label taken back after the run
    found = team.check_run(run_dir, params)
    assert found and all(f[0] in ("tables/annotator_agreement.csv", "tables/judge_door_summary.csv") for f in found)


def test_labels_add_and_serve_on_a_folder_that_is_no_run_refuse_and_write_nothing(tmp_path, capsys):
    """`labels add` on a corpus folder answered with a token and made a label database inside it; `labels serve`
    on a missing path made a database there before refusing."""
    corpus = tmp_path / "my-photos"
    corpus.mkdir()
    (corpus / "a.jpg").write_bytes(b"\xff\xd8\xff")
    before = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*"))
    assert labels_cli.main(["add", str(corpus), "ann", "--pool", "blind"]) == 2
    out = capsys.readouterr().out
    assert "holds no lookalike run with a judged pool" in out and "token" not in out.lower().replace("no tables", "")
    assert sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*")) == before
    missing = tmp_path / "nowhere"
    assert labels_cli.main(["serve", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().out and not missing.exists()
