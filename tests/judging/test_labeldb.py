"""The team label database: migrations, pools, leases and slots, replay refusal, undo that retracts,
machine labels kept apart, and the export into the run's label store (people first, adjudicators
above annotators)."""

from __future__ import annotations

import sqlite3
import threading
import time

import pandas as pd
import pytest

from tests.conftest import make_label_run
from lookalike.judging import labeldb
from lookalike.judging import team
from lookalike.judging.labeldb import LabelDB, LabelDBError, Replay
from lookalike.judging.server import load_run
from lookalike.judging.store import LabelStore, question_sha


@pytest.fixture
def run(tmp_path):
    return load_run(make_label_run(tmp_path / "run", questions=4, per_question=3))


@pytest.fixture
def db(tmp_path, run):
    d = LabelDB(tmp_path / "run" / "labels" / "labels.sqlite")
    d.add_pairs(run.pairs)
    return d


_ids = iter(range(10**9))


def rid() -> str:
    return f"req-{next(_ids):08d}"


def label_all(db: LabelDB, name: str, per_pair: int, label="irrelevant", separate=False, seed=0) -> list[str]:
    done = []
    while (got := db.next_pair(name, per_pair, 60, seed, separate)) is not None:
        db.submit(name, got.pair_id, label, "", rid(), per_pair, separate)
        done.append(got.pair_id)
    return done


def test_schema_is_created_by_versioned_migrations_once(tmp_path):
    path = tmp_path / "l.sqlite"
    first = LabelDB(path)
    assert first.version() == labeldb.SCHEMA_VERSION == 3
    LabelDB(path)                          # opening again applies nothing twice
    con = sqlite3.connect(path)
    assert con.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == len(labeldb.MIGRATIONS)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.execute("INSERT INTO schema_migrations VALUES (99, 'from the future', 'x')")
    con.commit()
    con.close()
    with pytest.raises(LabelDBError, match="schema version 99 is newer"):
        LabelDB(path)


def test_pairs_carry_the_offline_pages_opaque_ids_and_are_kept_on_reload(db, run):
    assert len(db.pairs()) == 12
    assert db.add_pairs(run.pairs) == 0                    # held pairs are kept as they are
    assert not any(u in pid for pid, u in zip(db.pairs()["pair_id"], db.pairs()["unit_id"]))


def test_people_are_added_by_the_lead_with_a_pool_and_a_token_kept_only_as_its_digest(db):
    a, token = db.add_person("a", "blind")
    m, _ = db.add_person("m", "metadata", lead=True)
    assert (a["pool"], a["lead"], m["pool"], m["lead"]) == ("blind", False, "metadata", True)
    assert db.person_by_token(token)["name"] == "a"
    assert db.settings()["door"] is True                 # a metadata pool turns the door on, recorded
    held = db.query("SELECT token_sha FROM annotators WHERE name = 'a'")["token_sha"].iloc[0]
    assert token not in held and len(held) == 64
    assert "token_sha" not in db.annotators().columns and db.annotators()["has_token"].all()
    for bad in ("", None, "x" * 500, token[:-1], token + " ", b"\xff\xfe", "ÄÖÜ"):
        with pytest.raises(LabelDBError) as err:
            db.person_by_token(bad)
        assert err.value.status == 401
    with pytest.raises(LabelDBError, match="1 to 60 characters"):
        db.add_person("<b>x</b>", "blind")
    with pytest.raises(LabelDBError, match="role"):
        db.add_person("f", "blind", "boss")
    with pytest.raises(LabelDBError, match="pool 'both'"):
        db.add_person("f", "both")


def test_a_version_1_database_upgrades_and_says_who_needs_a_token(tmp_path, run):
    import sqlite3

    from lookalike.judging.labeldb import MIGRATIONS
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied TEXT NOT NULL)")
    for statement in MIGRATIONS[0][2]:
        con.execute(statement.replace("{id}", "INTEGER PRIMARY KEY AUTOINCREMENT"))
    con.execute("INSERT INTO schema_migrations VALUES (1, 'v1', '2026-01-01')")
    con.execute("INSERT INTO annotators VALUES ('old', 'metadata', 'annotator', '2026-01-01')")
    con.commit()
    con.close()
    db = LabelDB(path)
    assert db.version() == labeldb.SCHEMA_VERSION
    people = db.annotators()
    assert people.set_index("name").loc["old", "pool"] == "metadata" and not people["has_token"].any()
    from lookalike.judging.server import people_lines
    assert any("no personal token" in line and "old" in line for line in people_lines(people, True, "RUN"))
    _, token = db.add_person("old", "metadata", new_token=True)
    assert db.person_by_token(token)["name"] == "old"


def test_every_pair_gets_per_pair_people_and_nobody_labels_one_twice(db):
    for n in ("a", "b", "c"):
        db.add_person(n, "blind")
    done = {n: label_all(db, n, per_pair=2) for n in ("a", "b", "c")}
    for n, pairs in done.items():
        assert len(pairs) == len(set(pairs)), f"{n} was shown a pair twice"
    counts = db.labels().groupby("pair_id").size()
    assert len(counts) == 12 and (counts == 2).all()


def test_leases_keep_a_slot_for_whoever_holds_it_until_it_expires(db):
    db.add_person("a", "blind")
    db.add_person("b", "blind")
    held = db.next_pair("a", 1, 60, 0, False)
    assert db.next_pair("a", 1, 60, 0, False).pair_id == held.pair_id     # asking again renews the same lease
    offered_to_b = set()
    while (got := db.next_pair("b", 1, 60, 0, False)) is not None:
        offered_to_b.add(got.pair_id)
        db.submit("b", got.pair_id, "supporting", "", rid(), 1, False)
    assert held.pair_id not in offered_to_b and len(offered_to_b) == 11
    db.submit("a", held.pair_id, "irrelevant", "", rid(), 1, False)       # a's slot was kept for a


def test_a_late_submit_after_the_lease_expired_and_the_slot_filled_is_refused(db):
    db.add_person("a", "blind")
    db.add_person("b", "blind")
    first = db.next_pair("a", 1, -1, 0, False)             # a lease that has already run out
    while (got := db.next_pair("b", 1, 60, 0, False)) is not None:
        db.submit("b", got.pair_id, "supporting", "", rid(), 1, False)
    with pytest.raises(LabelDBError, match="already has its 1 label") as err:
        db.submit("a", first.pair_id, "irrelevant", "", rid(), 1, False)
    assert err.value.status == 409
    assert len(db.labels()) == 12


def _together(work, args: list[tuple]) -> None:
    """work(*a) for each a, all in threads at once; returns when every one has finished."""
    threads = [threading.Thread(target=work, args=a) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_concurrent_claims_never_overfill_a_slot(db):
    names = [f"p{i}" for i in range(4)]
    for n in names:
        db.add_person(n, "blind")
    errors = []

    def work(n):
        try:
            label_all(db, n, per_pair=1)
        except Exception as exc:       # noqa: BLE001 (reported below)
            errors.append(exc)

    _together(work, [(n,) for n in names])
    assert not errors
    counts = db.labels().groupby("pair_id").size()
    assert len(counts) == 12 and (counts == 1).all()


@pytest.mark.parametrize("per_pair", [1, 2])
def test_leases_that_expire_while_people_label_never_overfill_a_slot(db, per_pair):
    # leases far shorter than the time people take: most expire while their holder is still labelling,
    # the pair is handed to someone else, and the first holder's late label must not take a second slot
    import random

    names = [f"p{i}" for i in range(4)]
    for n in names:
        db.add_person(n, "blind")
    errors = []

    def work(n, seed):
        pace = random.Random(seed)
        try:
            while (got := db.next_pair(n, per_pair, 0.02, 0, False)) is not None:
                time.sleep(pace.uniform(0.0, 0.05))
                try:
                    db.submit(n, got.pair_id, "irrelevant", "", rid(), per_pair, False)
                except LabelDBError as exc:
                    if exc.status != 409:         # a late label refused (409) is the rule at work
                        raise
        except Exception as exc:       # noqa: BLE001 (reported below)
            errors.append(exc)

    _together(work, [(n, i) for i, n in enumerate(names)])
    assert not errors
    counts = db.labels().groupby("pair_id").size()
    assert len(counts) == 12 and (counts == per_pair).all(), counts.to_dict()


def test_a_replayed_request_changes_nothing_and_says_what_it_did(db):
    db.add_person("a", "blind")
    got = db.next_pair("a", 1, 60, 0, False)
    db.submit("a", got.pair_id, "sufficient", "", "same-request-1", 1, False)
    with pytest.raises(Replay, match="already applied") as err:
        db.submit("a", got.pair_id, "sufficient", "", "same-request-1", 1, False)
    assert err.value.status == 409 and got.pair_id in err.value.result
    assert len(db.labels()) == 1


@pytest.mark.parametrize("change, message", [
    (dict(label="relevant"), "is not one of sufficient, supporting, irrelevant"),
    (dict(request_id="short"), "request_id must be 8 to 80"),
    (dict(pair_id="nope"), "is not in this run's pool"),
    (dict(name="stranger"), "nobody named 'stranger' is in this label database"),
    (dict(kind="adjudication"), "is not an adjudicator"),
])
def test_malformed_changes_are_refused_with_what_was_expected(db, change, message):
    db.add_person("a", "blind")
    got = db.next_pair("a", 1, 60, 0, False)
    args = dict(name="a", pair_id=got.pair_id, label="irrelevant", note="", request_id=rid(), per_pair=1,
                separate_pools=False)
    kind = change.pop("kind", "label")
    args.update(change)
    with pytest.raises(LabelDBError, match=message):
        db.submit(**args, kind=kind)
    assert db.labels().empty


def test_undo_retracts_the_label_keeps_it_and_shows_the_pair_again(db):
    db.add_person("a", "blind")
    got = db.next_pair("a", 1, 60, 0, False)
    db.submit("a", got.pair_id, "sufficient", "first try", rid(), 1, False)
    assert db.undo("a", rid(), 60) == got.pair_id
    assert db.labels().empty
    kept = db.labels(live=False)
    assert len(kept) == 1 and kept["retracted"].iloc[0] == 1 and kept["note"].iloc[0] == "first try"
    assert db.next_pair("a", 1, 60, 0, False).pair_id == got.pair_id
    db.submit("a", got.pair_id, "supporting", "", rid(), 1, False)
    assert db.labels()["label"].tolist() == ["supporting"]
    with pytest.raises(LabelDBError, match="nobody named"):
        db.undo("b", rid(), 60)
    db.add_person("b", "blind")
    assert db.undo("b", rid(), 60) is None                 # nothing to undo


def test_machine_labels_live_apart_and_never_become_peoples(db):
    db.add_person("a", "blind")
    got = db.next_pair("a", 1, 60, 0, False)
    db.submit("a", got.pair_id, "irrelevant", "", rid(), 1, False)
    pairs = db.pairs()
    db.set_machine_labels(pd.DataFrame({"pair_id": pairs["pair_id"], "judge": "answer-string", "label": "sufficient"}))
    db.set_machine_labels(pd.DataFrame({"pair_id": ["not-a-pair"], "judge": "answer-string", "label": "sufficient"}))
    assert len(db.machine_labels()) == 12
    labels = db.labels()
    assert len(labels) == 1 and labels["label"].iloc[0] == "irrelevant"


def _store_with_model(tmp_path, db) -> tuple[LabelStore, dict]:
    pairs = db.pairs()
    store = LabelStore(tmp_path / "store.jsonl")
    shas = dict(zip(pairs["query_id"], pairs["question_sha"]))
    store.append([{"query_id": q, "unit_id": u, "question_sha": s, "label": "sufficient", "judge": "answer-string",
                   "source": "model", "note": ""} for q, u, s in zip(pairs["query_id"], pairs["unit_id"], pairs["question_sha"])])
    return store, shas


def test_export_puts_people_over_the_model_and_an_adjudicator_over_annotators(tmp_path, db):
    store, shas = _store_with_model(tmp_path, db)
    for n in ("a", "b"):
        db.add_person(n, "blind")
    label_all(db, "a", 2, label="irrelevant")
    label_all(db, "b", 2, label="supporting")
    db.add_person("boss", "blind", "adjudicator")
    first = db.pairs()["pair_id"].iloc[0]
    db.submit("boss", first, "sufficient", "settled", rid(), 2, False, kind="adjudication")
    sent = team.export_to_store(db, store)
    assert sent == {"written": 25, "already_held": 0, "retracted": 0, "metadata_pool": 0}
    current = store.current(shas).set_index(["query_id", "unit_id"])
    row = db.pairs().set_index("pair_id").loc[first]
    settled = current.loc[(row["query_id"], row["unit_id"])]
    assert settled["label"] == "sufficient" and settled["judge"] == "adjudicator:boss" and not settled["conflict"]
    others = current.drop(index=(row["query_id"], row["unit_id"]))
    assert (others["source"] == "human").all() and others["conflict"].all()       # two people disagree, unsettled
    assert team.export_to_store(db, store)["written"] == 0                        # nothing twice


def test_export_follows_a_change_of_mind_back_and_forth(tmp_path, db):
    store, shas = _store_with_model(tmp_path, db)
    db.add_person("a", "blind")
    got = db.next_pair("a", 1, 60, 0, False)
    row = db.pairs().set_index("pair_id").loc[got.pair_id]
    key = (row["query_id"], row["unit_id"])
    for label in ("irrelevant", "supporting", "irrelevant"):
        if label != "irrelevant" or len(db.labels(live=False)):
            db.undo("a", rid(), 60)
        db.submit("a", got.pair_id, label, "", rid(), 1, False)
        team.export_to_store(db, store)
        assert store.current(shas).set_index(["query_id", "unit_id"]).loc[key, "label"] == label


def test_the_metadata_pools_labels_stay_out_of_the_store(tmp_path, db):
    store, _ = _store_with_model(tmp_path, db)
    a, b = db.add_person("a", "blind")[0], db.add_person("b", "metadata")[0]
    assert {a["pool"], b["pool"]} == {"blind", "metadata"}
    label_all(db, "a", 1, separate=True)
    label_all(db, "b", 1, separate=True)
    assert len(db.labels()) == 24                          # each pool fills its own slot
    sent = team.export_to_store(db, store)
    assert sent["written"] == 12 and sent["metadata_pool"] == 12
    blind = a["name"] if a["pool"] == "blind" else b["name"]
    people = [r for r in store.rows if r["source"] == "human"]
    assert {r["judge"] for r in people} == {f"annotator:{blind}"}


def test_resolve_and_existing_find_the_runs_database(tmp_path):
    run = tmp_path / "r"
    assert labeldb.resolve("", run) == str(run / "labels" / "labels.sqlite")
    assert labeldb.resolve("team.sqlite", run) == str(run / "team.sqlite")
    assert labeldb.resolve("postgresql://u:p@h/db", run) == "postgresql://u:p@h/db"
    assert labeldb.describe("postgresql://u:secret@h/db", run) == "postgresql://u:***@h/db"
    assert labeldb.existing("", run) is None
    LabelDB(labeldb.resolve("", run))
    assert labeldb.existing("", run) is not None


def test_question_sha_of_a_pair_is_the_stores(db):
    pairs = db.pairs()
    assert (pairs["question_sha"] == [question_sha(t) for t in pairs["question"]]).all()


def label_some(db: LabelDB, name: str, n: int, per_pair: int, separate: bool, label="irrelevant") -> list[str]:
    done = []
    for _ in range(n):
        got = db.next_pair(name, per_pair, 60, 0, separate)
        db.submit(name, got.pair_id, label, "", rid(), per_pair, separate)
        done.append(got.pair_id)
    return done


def test_pairs_others_began_come_first_so_pairs_finish_as_the_team_goes(db):
    for n in ("a", "b"):
        db.add_person(n, "blind")
    first = label_some(db, "a", 3, per_pair=2, separate=False)
    assert sorted(label_some(db, "b", 3, per_pair=2, separate=False)) == sorted(first)
    assert team.agreement_table(db.labels()).iloc[0]["n"] == 3


def test_with_the_door_on_each_pool_is_offered_what_the_other_pool_labelled(db):
    a, b = db.add_person("a", "blind")[0], db.add_person("b", "metadata")[0]
    assert {a["pool"], b["pool"]} == {"blind", "metadata"}
    done = label_some(db, "a", 4, per_pair=1, separate=True)
    assert sorted(label_some(db, "b", 4, per_pair=1, separate=True, label="supporting")) == sorted(done)


def test_a_file_that_is_not_a_label_database_is_refused_by_name(tmp_path):
    bad = tmp_path / "labels.sqlite"
    bad.write_bytes(b"these are not the labels you are looking for" * 100)
    with pytest.raises(LabelDBError, match="labels.sqlite: not a lookalike label database"):
        LabelDB(bad)
    with pytest.raises(LabelDBError, match="not a lookalike label database"):
        LabelDB(bad, migrate=False).inspect()
    assert bad.read_bytes().startswith(b"these are not")          # nothing written over it


def test_inspect_reads_without_changing(db):
    db.add_person("a", "blind")
    label_all(db, "a", 1)
    assert db.inspect() == {"version": labeldb.SCHEMA_VERSION, "pairs": 12, "labels": 12, "people": 1}


def test_placeholders_follow_the_drivers_paramstyle_and_leave_literals_alone():
    from lookalike.judging.labeldb import to_paramstyle

    sql = "SELECT '?', \"a?b\", x FROM t WHERE y = ? AND z LIKE 'p%' -- why?\nAND w = ?"
    assert to_paramstyle(sql, "qmark") == sql
    assert to_paramstyle(sql, "pyformat") == ("SELECT '?', \"a?b\", x FROM t WHERE y = %s AND z LIKE 'p%%' -- why?\n"
                                              "AND w = %s")
    assert to_paramstyle("SELECT 'it''s ?' , ?", "format") == "SELECT 'it''s ?' , %s"
    assert to_paramstyle("SELECT 5 % 2, ?", "pyformat") == "SELECT 5 %% 2, %s"
    with pytest.raises(LabelDBError, match="paramstyle 'named'"):
        to_paramstyle(sql, "named")
