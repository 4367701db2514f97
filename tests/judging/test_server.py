"""The team label server over HTTP: people the lead added, each signing in with a personal token
(Bearer or the sign-in cookie; unknown, malformed or forged identities get 401), blind queues that
carry nothing but the question and an opaque id, the metadata pool, clear errors for malformed and
replayed requests, corpus text kept out of the page's markup, the adjudicator's queue, progress and
agreement pages (pools shown to the lead only) — and a server killed with SIGKILL mid-submit that
loses no acknowledged label and doubles none. PostgreSQL is exercised against a throwaway local
server (pgserver) when it can start here."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import make_label_run
from lookalike.judging import server
from lookalike.judging import labeldb
from lookalike.judging.labeldb import LabelDB, LabelDBError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_dir(tmp_path):
    return make_label_run(tmp_path / "run", questions=4, per_question=3)


def client(run_dir, **settings):
    from starlette.testclient import TestClient

    db = LabelDB(run_dir / "labels" / "labels.sqlite")
    return TestClient(server.create_app(server.load_run(run_dir), db, server.Settings(**settings))), db


def add(db, name, pool="blind", **kw) -> dict:
    """A person the lead added: the headers a script of theirs sends (their personal token)."""
    _, token = db.add_person(name, pool, **kw)
    return {"Authorization": f"Bearer {token}"}


def test_a_blind_queue_carries_only_the_question_and_an_opaque_id(run_dir):
    c, db = client(run_dir)
    h = add(db, "ann")
    assert c.get("/api/me", headers=h).json()["pool"] == "blind"
    got = c.get("/api/next", headers=h).json()
    assert set(got) == {"done", "mine", "pairs", "pair_id", "question"}
    units = {u for u in db.pairs()["unit_id"]}
    assert not any(u in json.dumps(got) for u in units)
    assert "png" not in json.dumps(got)                     # no file name
    image = c.get(f"/api/image/{got['pair_id']}", headers=h)
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"


def test_the_metadata_pool_sees_file_name_and_caption(run_dir):
    c, db = client(run_dir, door=True, per_pair=1)
    h = add(db, "meta", "metadata")
    assert c.get("/api/me", headers=h).json()["door"] is True
    got = c.get("/api/next", headers=h).json()
    assert set(got["metadata"]) == {"file name", "caption"} and got["metadata"]["file name"].endswith(".png")


def test_the_page_holds_no_corpus_text_and_the_api_returns_it_as_data(run_dir):
    c, db = client(run_dir)
    page = c.get("/").text
    assert "<script>alert" not in page and "onerror" not in page and "http://" not in page and "https://" not in page
    h = add(db, "ann")
    questions = set()
    while not (got := c.get("/api/next", headers=h).json())["done"]:
        questions.add(got["question"])
        r = c.post("/api/label", headers=h, json={"pair_id": got["pair_id"], "label": "irrelevant",
                                                  "request_id": f"r-{got['pair_id']}"})
        assert r.status_code == 200
    assert "What was the revenue of firm 1 in 2023? <script>alert('q')</script>" in questions
    assert len(db.labels()) == 12


@pytest.mark.parametrize("headers", [
    {},
    {"X-Annotator": "ann"},                                          # a name claimed, not proved
    {"X-Annotator": "ann", "X-Token": "anything"},
    {"Authorization": "Bearer not-a-token-anyone-has"},
    {"Authorization": "Bearer " + "x" * 5000},
    {"Authorization": "Bearer ÄÖÜ-日本語".encode()},                   # raw UTF-8 bytes in the header
    {"Authorization": b"Bearer \xff\xfe\x01"},                      # bytes that are no text at all
    {"Cookie": "lookalike_labels=Ä日本".encode()},
    {"Authorization": "Basic YW5uOmFubg=="},
    {"Cookie": "lookalike_labels=forged"},
])
def test_nothing_but_a_known_token_gets_anything(run_dir, headers):
    c, db = client(run_dir)
    add(db, "ann")
    for path in ("/api/me", "/api/next", "/progress", "/agreement", f"/api/image/{db.pairs()['pair_id'].iloc[0]}"):
        r = c.get(path, headers=headers)
        assert r.status_code == 401, (path, r.status_code, r.text)
    r = c.post("/api/label", headers=headers, json={"pair_id": db.pairs()["pair_id"].iloc[0], "label": "irrelevant",
                                                  "request_id": "forged-0001"})
    assert r.status_code == 401 and db.labels().empty


def test_a_token_in_the_url_is_never_read(run_dir):
    c, db = client(run_dir)
    _, token = db.add_person("ann", "blind")
    assert c.get(f"/api/next?token={token}").status_code == 401
    assert c.get(f"/progress?token={token}").status_code == 401


def test_the_sign_in_page_sets_an_httponly_same_site_cookie_and_sign_out_clears_it(run_dir):
    c, db = client(run_dir)
    _, token = db.add_person("ann", "blind")
    assert c.post("/api/signin", json={"token": "wrong-token"}).status_code == 401
    assert c.post("/api/signin", json={"token": ["a", "list"]}).status_code == 401
    r = c.post("/api/signin", json={"token": token})
    assert r.status_code == 200 and r.json()["name"] == "ann"
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert c.get("/api/next").status_code == 200                    # the cookie alone identifies them
    # a cross-site form cannot post JSON: a post that is not application/json is refused before anything
    r = c.post("/api/label", content=b"pair_id=x&label=irrelevant", headers={"Content-Type":
                                                                              "application/x-www-form-urlencoded"})
    assert r.status_code == 415
    assert c.post("/api/signout", json={}).status_code == 200
    assert c.get("/api/next").status_code == 401


def test_pools_are_the_leads_choice_never_the_order_of_sign_in(run_dir):
    c, db = client(run_dir, door=True)
    for i in range(5):
        add(db, f"b{i}", "blind")
    h = add(db, "m", "metadata")
    assert c.get("/api/me", headers=h).json()["pool"] == "metadata"
    assert set(db.annotators()["pool"]) == {"blind", "metadata"}
    assert (db.annotators()["pool"] == "metadata").sum() == 1
    with pytest.raises(LabelDBError, match="already in this label database"):
        db.add_person("m", "metadata")
    with pytest.raises(LabelDBError, match="pool never changes"):
        db.add_person("m", "blind", new_token=True)
    with pytest.raises(LabelDBError, match="an adjudicator is blind"):
        db.add_person("x", "metadata", role="adjudicator")
    old = h
    new = add(db, "m", "metadata", new_token=True)
    assert c.get("/api/me", headers=old).status_code == 401 and c.get("/api/me", headers=new).status_code == 200


def test_pools_are_shown_to_the_lead_only(run_dir):
    c, db = client(run_dir, door=True, per_pair=1)
    lead, ann = add(db, "lead", lead=True), add(db, "ann")
    add(db, "meta", "metadata")
    assert "metadata" in c.get("/progress", headers=lead).text
    progress = c.get("/progress", headers=ann)
    assert progress.status_code == 200 and "metadata" not in progress.text and "pools" not in progress.text
    assert c.get("/agreement", headers=ann).status_code == 403
    assert c.get("/agreement", headers=lead).status_code == 200


@pytest.mark.parametrize("body, status, words", [
    (b"{not json", 400, "not JSON"),
    (b"[1, 2]", 400, "must be a JSON object"),
    (b'{"pair_id": "x"}', 400, "lacks label, request_id"),
    (b'{"pair_id": "x", "label": "irrelevant", "request_id": "abcdefgh-1"}', 404, "not in this run's pool"),
    (b'{"pair_id": "x", "label": "maybe", "request_id": "abcdefgh-1"}', 400, "is not one of"),
    (b'{"pair_id": "x", "label": "irrelevant", "request_id": "a b"}', 400, "request_id must be"),
    (b'{"pair_id": "x", "label": "irrelevant", "request_id": "abcdefgh-1", "seconds": "soon"}', 400, "seconds must be"),
])
def test_malformed_requests_get_a_clear_error(run_dir, body, status, words):
    c, db = client(run_dir)
    h = add(db, "ann")
    r = c.post("/api/label", headers={**h, "Content-Type": "application/json"}, content=body)
    assert r.status_code == status and words in r.json()["error"]
    assert db.labels().empty
    assert c.get("/api/next").status_code == 401 and "personal token" in c.get("/api/next").json()["error"]


def test_a_replayed_label_is_answered_as_a_replay_and_not_stored_twice(run_dir):
    c, db = client(run_dir)
    h = add(db, "ann")
    got = c.get("/api/next", headers=h).json()
    body = {"pair_id": got["pair_id"], "label": "supporting", "request_id": "retry-me-0001", "note": "a <b>note</b>"}
    assert c.post("/api/label", headers=h, json=body).status_code == 200
    again = c.post("/api/label", headers=h, json=body)
    assert again.status_code == 409 and again.json()["replay"] is True
    assert len(db.labels()) == 1 and db.labels()["note"].iloc[0] == "a <b>note</b>"


def test_undo_then_the_same_pair_again(run_dir):
    c, db = client(run_dir)
    h = add(db, "ann")
    got = c.get("/api/next", headers=h).json()
    c.post("/api/label", headers=h, json={"pair_id": got["pair_id"], "label": "sufficient", "request_id": "first-0001"})
    assert c.post("/api/undo", headers=h, json={"request_id": "undo-00001"}).json()["undone"] == got["pair_id"]
    assert c.get("/api/next", headers=h).json()["pair_id"] == got["pair_id"]
    assert len(db.labels(live=False)) == 1 and db.labels().empty


def test_the_adjudicator_settles_disagreements_and_annotators_cannot(run_dir):
    c, db = client(run_dir, per_pair=2)
    people = {"a": add(db, "a"), "b": add(db, "b")}
    for name, label in (("a", "irrelevant"), ("b", "sufficient")):
        h = people[name]
        while not (got := c.get("/api/next", headers=h).json())["done"]:
            c.post("/api/label", headers=h, json={"pair_id": got["pair_id"], "label": label,
                                                  "request_id": f"{name}-{got['pair_id']}"})
    ha = people["a"]
    assert c.get("/api/adjudicate/next", headers=ha).status_code == 403
    hj = add(db, "judge", role="adjudicator", lead=True)
    first = c.get("/api/adjudicate/next", headers=hj).json()
    assert first["left"] == 12 and first["reason"] == "people disagree" and first["labels"] == "a: irrelevant; b: sufficient"
    r = c.post("/api/adjudicate", headers=hj, json={"pair_id": first["pair_id"], "label": "supporting", "request_id": "adj-000001"})
    assert r.status_code == 200
    assert c.get("/api/adjudicate/next", headers=hj).json()["left"] == 11
    assert c.post("/api/adjudicate", headers=ha, json={"pair_id": first["pair_id"], "label": "supporting",
                                                        "request_id": "adj-000002"}).status_code == 403
    agreement = c.get("/agreement", headers=hj).text
    assert "kappa undefined" in agreement and "raw agreement 0.00" in agreement
    progress = c.get("/progress", headers=hj).text
    assert "24 of 24 label slots filled" in progress


def test_a_metadata_pool_only_split_never_reaches_the_adjudicator_over_http(run_dir):
    """Four people in two pools: where only the metadata pool splits, the adjudicator is given nothing
    and never reads what the metadata pool said; a blind split is queued with the blind labels only."""
    c, db = client(run_dir, door=True, per_pair=2)
    people = {n: add(db, n, pool) for n, pool in (("b1", "blind"), ("b2", "blind"), ("m1", "metadata"),
                                                   ("m2", "metadata"))}
    blind_split = None
    for name, h in people.items():
        i = 0
        while not (got := c.get("/api/next", headers=h).json())["done"]:
            label = {"b1": "irrelevant", "b2": "irrelevant", "m1": "irrelevant", "m2": "supporting"}[name]
            if name == "b2" and blind_split is None:
                label, blind_split = "sufficient", got["pair_id"]
            r = c.post("/api/label", headers=h, json={"pair_id": got["pair_id"], "label": label,
                                                      "request_id": f"{name}-{i:05d}"})
            assert r.status_code == 200, r.text
            i += 1
    assert len(db.labels()) == 12 * 4
    hj = add(db, "judge", role="adjudicator")
    first = c.get("/api/adjudicate/next", headers=hj).json()
    assert first["left"] == 1 and first["pair_id"] == blind_split
    assert "m1" not in first["labels"] and "m2" not in first["labels"] and "supporting" not in first["labels"]


# ----------------------------------------------------------------------------- a real server, killed

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(run_dir: Path, port: int, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "lookalike", "labels", "serve", str(run_dir), "--port", str(port), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stdout.read().decode()) from None
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the label server did not start in 60 s")


def call(port, path, body=None, token=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_kill_9_mid_submit_loses_no_acknowledged_label_and_doubles_none(tmp_path):
    import random

    run_dir = make_label_run(tmp_path / "run", questions=15, per_question=4)     # 60 pairs, 120 slots
    port = free_port()
    names = ["a", "b", "c"]
    db = LabelDB(run_dir / "labels" / "labels.sqlite")
    tokens = {n: db.add_person(n, "blind")[1] for n in names}
    acked: dict[str, tuple[str, str]] = {}        # request id -> (person, pair) the server confirmed
    sent: dict[str, tuple[str, str]] = {}         # every request id sent, answered or not
    lock = threading.Lock()
    in_flight = threading.Event()
    counter = iter(range(10**6))
    jitter = random.Random(36)

    def annotate(name, stop):
        while not stop.is_set():
            try:
                status, got = call(port, "/api/next", token=tokens[name], timeout=2)
                if got.get("done"):
                    return
                with lock:
                    request_id = f"{name}-{next(counter):06d}"
                    sent[request_id] = (name, got["pair_id"])
                in_flight.set()
                status, answer = call(port, "/api/label", {"pair_id": got["pair_id"], "label": "irrelevant",
                                                           "request_id": request_id}, token=tokens[name], timeout=2)
                if status == 200:
                    with lock:
                        acked[request_id] = (name, got["pair_id"])
            except (OSError, urllib.error.URLError):
                return                                # the server is gone

    for _round in range(3):                          # three kills, each while a label request is on its way
        proc = start(run_dir, port, "--per-pair", "2")
        for n in names:
            assert call(port, "/api/me", token=tokens[n])[0] == 200
        stop = threading.Event()
        threads = [threading.Thread(target=annotate, args=(n, stop)) for n in names]
        for t in threads:
            t.start()
        target = len(acked) + 8
        while len(acked) < target:
            time.sleep(0.002)
        in_flight.clear()
        in_flight.wait(5)
        time.sleep(jitter.uniform(0, 0.004))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        stop.set()
        for t in threads:
            t.join()

    proc = start(run_dir, port, "--per-pair", "2")
    try:
        # every client retries what it sent with the same id: acknowledged ones are replays
        outcomes = {rid: call(port, "/api/label", {"pair_id": pair, "label": "irrelevant", "request_id": rid},
                              token=tokens[who])
                    for rid, (who, pair) in sorted(sent.items())}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    for rid in acked:
        assert outcomes[rid][0] == 409 and outcomes[rid][1]["replay"], (rid, outcomes[rid])
    ids = LabelDB(run_dir / "labels" / "labels.sqlite").query("SELECT request_id, annotator, pair_id FROM labels")
    assert ids["request_id"].is_unique
    got = {r: (a, p) for r, a, p in ids.itertuples(index=False)}
    for rid, who_pair in acked.items():
        assert got.get(rid) == who_pair, f"acknowledged label {rid} lost"
    assert set(got) <= set(sent), "a label was stored that nobody sent"
    stored_pairs = set(got.values())
    for rid, (status, answer) in outcomes.items():
        # an unanswered label either lands now, or was committed before the kill (a replay), or its person
        # labelled that pair again under a new id after the restart (refused: one label per person and pair)
        assert status == 200 or answer.get("replay") or (
            status == 409 and "already labelled" in answer["error"] and sent[rid] in stored_pairs), (rid, answer)
    assert not ids.duplicated(["annotator", "pair_id"]).any(), "someone labelled a pair twice"
    assert (ids.groupby("pair_id").size() <= 2).all()
    unanswered = set(sent) - set(acked)
    replayed = sum(1 for r in unanswered if outcomes[r][1].get("replay"))
    landed = sum(1 for r in unanswered if outcomes[r][0] == 200)
    print(f"kill -9 x3: {len(acked)} acknowledged, {len(unanswered)} sent without an answer ({replayed} committed "
          f"before the kill, {landed} stored on retry, {len(unanswered) - replayed - landed} relabelled under a new id); "
          f"{len(ids)} labels after the retries")


def _pgserver(tmp_path):
    pgserver = pytest.importorskip("pgserver", reason="pgserver is not installed")
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    try:
        return pgserver.get_server(str(tmp_path / "pg"), cleanup_mode="stop")
    except Exception as exc:      # noqa: BLE001 (any failure to start a local PostgreSQL is a skip, said why)
        pytest.skip(f"a local PostgreSQL could not start here: {exc}")


def test_the_same_guarantees_on_postgresql(tmp_path, run_dir):
    from lookalike.judging import team

    pg = _pgserver(tmp_path)
    try:
        db = LabelDB(pg.get_uri())
        assert db.postgres and db.version() == labeldb.SCHEMA_VERSION
        db.add_pairs(server.load_run(run_dir).pairs)
        names = ["a", "b", "c"]
        for n in names:
            db.add_person(n, "blind")
        errors = []

        def work(n):
            try:
                i = 0
                while (got := db.next_pair(n, 2, 60, 0, False)) is not None:
                    db.submit(n, got.pair_id, "irrelevant", "", f"{n}-pg-{i:04d}", 2, False)
                    i += 1
            except Exception as exc:    # noqa: BLE001 (reported below)
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        labels = db.labels()
        assert len(labels) == 24 and (labels.groupby("pair_id").size() == 2).all()
        assert not labels.duplicated(["annotator", "pair_id"]).any()
        from lookalike.judging.labeldb import Replay
        with pytest.raises(Replay):
            db.submit("a", labels["pair_id"].iloc[0], "irrelevant", "", "a-pg-0000", 2, False)
        assert db.undo("a", "undo-pg-0001", 60) is not None and len(db.labels(live=False)) == 24
        assert team.agreement_table(db.labels()).iloc[0]["n"] > 0
    finally:
        pg.cleanup()


# ------------------------------------------------------------------ every route fuzzed

def _json_values():
    from hypothesis import strategies as st

    # any code point, lone surrogates included (JSON spells them as \ud800 escapes); the odd ones drawn often,
    # since among 1.1 million code points a surrogate is otherwise one draw in 500
    odd = st.sampled_from(["\ud800", "\udfff", "\x00", "\u202e", "\ufeff", "<", '"', "\\", "é", "a"])
    text = st.text(alphabet=odd, max_size=12) | st.text(
        alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None), max_size=40)
    leaves = text | st.none() | st.booleans() | st.integers() | st.floats()
    return text, st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner,
                                                                                                  max_size=4),
                              max_leaves=12)


_FIELDS = ["token", "pair_id", "label", "request_id", "note", "seconds", "kind"]


def test_every_route_answers_any_json_body_with_a_reason_never_a_5xx(tmp_path):
    """Every POST route and every signed-in role, given bodies hypothesis draws: any Unicode (lone surrogates
    too), wrong types, nested values, the routes' own field names with any value. A surrogate in the sign-in
    token, a label's pair_id or an undo's kind used to end in HTTP 500 (the text could not be stored)."""
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    run = make_label_run(tmp_path / "run", questions=3, per_question=2)
    c, db = client(run)
    who = {"nobody": {}, "annotator": add(db, "ann"), "adjudicator": add(db, "adj", role="adjudicator", lead=True)}
    routes = ["/api/signin", "/api/signout", "/api/label", "/api/undo", "/api/adjudicate"]
    text, values = _json_values()
    # each route's own fields, any of them present with text or with any value, or any JSON at all
    bodies = (st.fixed_dictionaries({}, optional={f: text for f in _FIELDS})
              | st.fixed_dictionaries({}, optional={f: values for f in _FIELDS}) | values)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(route=st.sampled_from(routes), role=st.sampled_from(sorted(who)), data=bodies)
    # the three the catalogue found, always tried first
    @example(route="/api/signin", role="nobody", data={"token": "\ud800"})
    @example(route="/api/label", role="annotator", data={"pair_id": "\udfff", "label": "irrelevant",
                                                          "request_id": "abcdefgh-1"})
    @example(route="/api/undo", role="annotator", data={"request_id": "abcdefgh-1", "kind": "\ud834"})
    def check(route, role, data):
        raw = json.dumps(data, ensure_ascii=True, allow_nan=True).encode("ascii")
        r = c.post(route, headers={**who[role], "Content-Type": "application/json"}, content=raw)
        assert r.status_code < 500, (route, role, data, r.text)
        if r.status_code >= 400:
            assert r.json()["error"], (route, role, data)

    check()


def test_a_lone_surrogate_is_refused_with_its_field_named(run_dir):
    c, db = client(run_dir)
    h = add(db, "ann")
    for route, raw in (("/api/signin", b'{"token": "\\ud800"}'),
                       ("/api/label", b'{"pair_id": "\\udfff", "label": "irrelevant", "request_id": "abcdefgh-1"}'),
                       ("/api/undo", b'{"request_id": "abcdefgh-1", "kind": "\\ud834"}')):
        r = c.post(route, headers={**h, "Content-Type": "application/json"}, content=raw)
        assert r.status_code == 400 and "not valid Unicode" in r.json()["error"], (route, r.text)
    assert db.labels(live=False).empty


def test_after_sign_out_the_old_cookie_signs_nobody_in(run_dir):
    """The cookie was the token: after sign-out, the same cookie sent again still signed its holder in."""
    c, db = client(run_dir)
    _, token = db.add_person("ann", "blind")
    r = c.post("/api/signin", json={"token": token})
    session = c.cookies.get(server.COOKIE)
    assert session and session != token and token not in r.headers["set-cookie"]
    assert session not in str(db.query("SELECT * FROM sessions").to_dict())     # the database keeps its hash only
    assert c.get("/api/next").status_code == 200
    assert c.post("/api/signout", json={}).status_code == 200
    c.cookies.clear()
    c.cookies.set(server.COOKIE, session)                    # the old cookie, kept or copied
    again = c.get("/api/next")
    assert again.status_code == 401 and "your session has ended" in again.json()["error"]
    # a script's bearer token is untouched by a browser's sign-out
    assert c.get("/api/next", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    # a session outlives a restart of the server (it is the label database's), and a token the lead
    # replaces ends the sessions signed in with it
    c.cookies.clear()
    c.post("/api/signin", json={"token": token})
    restarted, _ = client(run_dir)
    restarted.cookies.set(server.COOKIE, c.cookies.get(server.COOKIE))
    assert restarted.get("/api/next").status_code == 200
    db.add_person("ann", "blind", new_token=True)
    assert c.get("/api/next").status_code == 401
