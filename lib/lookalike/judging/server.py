"""``lookalike labels serve``: the team label server — a Starlette app over the label database.

The lead adds each person with ``lookalike labels add RUN NAME --pool blind|metadata`` and gives
them the personal token it prints once. A person signs in with it (the page sets an HttpOnly,
same-site cookie; a script sends ``Authorization: Bearer <token>``; never in a URL); an unknown
token is refused, and nothing a client claims about itself (a name header) counts. Each person gets
their own shuffled, blind queue of the run's pooled pairs: the question and the page image only —
never the system, rank, file name, caption or unit id (the image is fetched by an opaque pair id).
The metadata pool's people also see the file name and caption beside the page, which is how the
judge door is measured with people. Adjudicators (blind) get the blind pool's disagreement queue
(machine-flagged pairs first). Every change is one database transaction carrying a client request
id, so a retry never doubles a label and a closed browser loses nothing. Who is in which pool is
shown to the lead only.

The round's settings (labels per pair, the door) live in the database: the run's params seed a new
one, ``labels serve --per-pair / --door`` change it (recorded), and stage 06 and ``labels export``
read them from there.

Pages are jinja2 templates (``report/templates``, autoescaped; corpus text reaches the DOM through
``textContent`` only), with no script or style from anywhere else.
"""

from __future__ import annotations

import json
import math
import mimetypes
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from lookalike import params as P
from lookalike.data.schema import resolve_image
from lookalike.judging import team
from lookalike.judging.labeldb import LabelDB, LabelDBError, Replay, pool_pairs, resolve
from lookalike.judging.store import LabelStore, pair_id
from lookalike.report import pages, run_folder
from lookalike.vocab import unit_noun

COOKIE = "lookalike_labels"
# a client's request body: the page sends a few short fields; anything larger or deeper is a mistake or
# an attack, answered with the reason, never parsed into a 500
MAX_BODY = 64 * 1024
MAX_DEPTH = 8


def _depth(value: Any, limit: int) -> int:
    """How deep lists and objects nest in a parsed body (stops counting past limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _not_unicode(value: Any) -> str | None:
    """Where a parsed body holds a string UTF-8 cannot encode (a lone surrogate, which JSON's \\u escapes
    can spell): 'field "token"', 'a field name', or None when every string is text."""
    stack: list[tuple[Any, str]] = [(value, "the body")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(item, dict):
            for k, v in item.items():
                stack.append((k, "a field name"))
                stack.append((v, f"field {k!r}" if where == "the body" else where))
        elif isinstance(item, list):
            stack.extend((v, where) for v in item)
    return None


@dataclass
class Settings:
    """The label server's settings: the round's (per_pair, door: the database's, seeded by the run's
    params; command-line flags change them) and the server's own (lease_s, seed: the params')."""

    per_pair: int = 1
    door: bool = False
    lease_s: float = 900.0
    seed: int = 0

    @property
    def separate_pools(self) -> bool:
        """Whether the two pools (image only, image with metadata) are kept apart: the door's rule."""
        return self.door

    @property
    def pools(self) -> int:
        """How many pools labels are counted in: two behind the door, else one."""
        return 2 if self.door else 1


@dataclass
class RunPairs:
    """What the server knows of a run beyond the database: each pair's image and, for the metadata
    pool only, its unit's file name and caption."""

    run_dir: Path
    pairs: pd.DataFrame
    images: dict[str, Path] = field(default_factory=dict)
    metadata: dict[str, dict] = field(default_factory=dict)
    machine: pd.DataFrame | None = None
    noun: str = "page"               # what the rubric calls a unit (vocab.unit_noun)


def run_params(run_dir: Path):
    """The typed parameters a finished run was made with (its manifest.json; base.yaml's defaults for a
    folder without one)."""
    try:
        cfg = run_folder.run_config(run_dir)
    except run_folder.ManifestError as exc:
        raise LabelDBError(f"{run_dir / 'manifest.json'}: {exc}", 500) from None
    return cfg if cfg is not None else P.recorded({})


def flagged_pairs(validation: pd.DataFrame, judgements: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(query, unit) -> judge, for each page a machine judge says answers a question people judged
    (question_validation's flagged_by; the page from validation_judgements' distractor rows)."""
    if "flagged_by" not in validation.columns or judgements.empty:
        return {}
    by = {q: j for q, j in zip(validation["query_id"], validation["flagged_by"].astype(str)) if j}
    out = {}
    gold_rows = judgements[judgements["role"] == "gold"]
    golds = {q: set(str(u).split(";")) for q, u in zip(gold_rows["query_id"], gold_rows["unit_ids"])}
    hits = judgements[(judgements["role"] == "distractor") & (judgements["label"] == "sufficient")
                      & judgements["query_id"].isin(set(by))]
    for q, ids in zip(hits["query_id"], hits["unit_ids"].astype(str)):
        for u in ids.split(";"):
            if u and u not in golds.get(q, set()):
                out[(q, u)] = by[q]
    return out


def require_run(run_dir: Path | str) -> None:
    """Refuse, before anything is written, a folder that holds no run with a judged pool (stage 06's
    tables/pool.csv): a label database or a token made there would sit in someone's corpus folder."""
    run_dir = Path(run_dir)
    if not (run_dir / "tables" / "pool.csv").is_file():
        what = "does not exist" if not run_dir.exists() else "holds no lookalike run with a judged pool (no tables/pool.csv)"
        raise LabelDBError(f"{run_dir} {what}: give a run folder such as outputs/demo, after stage 06 (judge pool) "
                           "ran; nothing was written", 404)


def load_run(run_dir: Path | str) -> RunPairs:
    """The run's pooled pairs (stage 06's tables/pool.csv), their images and metadata, and the model's
    pre-labels from the store (for agreement with people; never shown to anyone labelling)."""
    run_dir = Path(run_dir)
    tables = run_dir / "tables"
    need = [tables / f"{n}.csv" for n in ("pool", "questions_validated", "units")]
    missing = [str(p) for p in need if not p.is_file()]
    if missing:
        raise LabelDBError(f"{', '.join(missing)} not found: run stage 06 (judge pool) for this run first", 500)
    read = lambda name: pd.read_csv(tables / f"{name}.csv", keep_default_na=False)  # noqa: E731
    pool, questions, units = read("pool"), read("questions_validated"), read("units")
    flags = (flagged_pairs(read("question_validation"), read("validation_judgements"))
             if (tables / "question_validation.csv").is_file() and (tables / "validation_judgements.csv").is_file()
             else {})
    pairs = pool_pairs(pool, questions, flags)
    by_unit = units.set_index("unit_id")
    images, metadata = {}, {}
    for pid, u in zip(pairs["pair_id"], pairs["unit_id"]):
        row = by_unit.loc[u]
        images[pid] = resolve_image(str(row["image_path"]), run_dir)
        metadata[pid] = {"file": str(row.get("filename", "") or ""), "caption": str(row.get("caption", "") or "")}
    machine = None
    store_path = run_dir / "labels" / "store.jsonl"
    if store_path.is_file():
        text = dict(zip(questions["query_id"], questions["text"].astype(str)))
        model = LabelStore(store_path).frame()
        model = model[model["source"] == "model"]
        if len(model):
            model = model.assign(pair_id=[pair_id(q, u, text.get(q, "")) for q, u in zip(model["query_id"], model["unit_id"])])
            machine = (model[model["pair_id"].isin(set(pairs["pair_id"]))]
                       .groupby(["pair_id", "judge"], sort=True).tail(1)[["pair_id", "judge", "label"]])
    source = str(run_params(run_dir).corpus.source) if (run_dir / "manifest.json").is_file() else ""
    noun = unit_noun(source, units["content_type"] if "content_type" in units.columns else ())
    return RunPairs(run_dir, pairs, images, metadata, machine, noun)


def settings_from(cfg, db: LabelDB | None = None, **overrides) -> tuple[Settings, list[str]]:
    """The round's settings: the database's when it holds them (the run's params only seed a new one),
    command-line overrides recorded in it. Returns the settings and, in words, what was changed and
    where the params now disagree with the database."""
    labels = cfg.labels
    given = {"per_pair": int(labels.per_pair), "door": bool(labels.door)}
    notes: list[str] = []
    if db is not None:
        db.record_settings(given, "the run's params (seeded a new database)", only_new=True)
        notes += [f"changed: {c}" for c in db.record_settings(overrides, "lookalike labels serve")]
        held = db.settings()
        notes += [f"the run's params say labels.{k} {_word(v)}; the label database says {_word(held[k])}, which is "
                  "what this round runs with" for k, v in given.items() if k in held and held[k] != v
                  and overrides.get(k) is None]
        given = held
    else:
        given.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(per_pair=int(given["per_pair"]), door=bool(given["door"]),
                    lease_s=60.0 * float(labels.lease_minutes), seed=int(cfg.seed)), notes


def _word(value) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def open_db(run_dir: Path, cfg, db: str | None = None) -> LabelDB:
    """The label database the run names (labels.db), or the one given on the command line."""
    return LabelDB(resolve(db if db is not None else cfg.labels.db, run_dir))


def bearer(request: HTTPConnection) -> str:
    """The personal token a request carries (``Authorization: Bearer …``: a script's). Never a query
    parameter: a URL ends up in logs, history and screenshots. A browser carries a session instead
    (``COOKIE``), which names no token."""
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else ""


# ----------------------------------------------------------------------------- the app

@dataclass
class _Round:
    """What every route reads: the run's pairs, the database and the settings (app.state.round)."""

    run: RunPairs
    db: LabelDB
    settings: Settings
    known: set[str]


def _round(request: Request) -> _Round:
    return request.app.state.round


class _Person(BaseUser):
    def __init__(self, who: dict):
        self.who = who

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.who["name"]


class TokenBackend(AuthenticationBackend):
    """Who a request is: the person whose personal token it carries (``bearer``), looked up in the
    database; a request without one, or with one nobody has, is anonymous and the routes that need a
    person answer 401 with the reason (the sign-in page itself needs nobody)."""

    async def authenticate(self, conn):
        """The person the request's token names, or None (anonymous); a token the database refuses is recorded for
        the 401's reason."""
        token, session = bearer(conn), conn.cookies.get(COOKIE, "")
        if not token and not session:
            return None
        db = conn.app.state.round.db
        try:
            # a script's bearer token, else the browser's session (the label database's, so it outlives a
            # restart of the server and ends when its person signs out)
            who = db.person_by_token(token) if token else db.person_by_session(session)
        except LabelDBError as exc:
            conn.scope["lookalike_refused"] = str(exc)
            return None
        return AuthCredentials(["person"]), _Person(who)


def person(request: Request) -> dict:
    """The signed-in person (name, pool, role, lead), or LabelDBError 401 saying why there is none."""
    if not request.user.is_authenticated:
        raise LabelDBError(request.scope.get("lookalike_refused")
                           or "sign in with your personal token (the lead makes it with `lookalike labels add`)", 401)
    return request.user.who


async def body(request: Request, *fields: str) -> dict:
    """A request's JSON object with the fields it must hold; a body that is not JSON, too large, too
    deep or lacking a field is refused with the reason."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":       # a cross-site form cannot send JSON: a forged post stops here
        raise LabelDBError(f"the request body must be sent as application/json, not {kind or 'nothing'}", 415)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise LabelDBError(f"the request body is {int(declared):,} bytes; the server takes at most {MAX_BODY:,}", 413)
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise LabelDBError(f"the request body is over {MAX_BODY:,} bytes, the most the server takes", 413)
    try:
        data = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LabelDBError(f"the request body is not JSON ({exc})") from exc
    except RecursionError:
        raise LabelDBError(f"the request body nests lists or objects too deeply (more than {MAX_DEPTH} levels)"
                           ) from None
    if _depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise LabelDBError(f"the request body nests lists or objects more than {MAX_DEPTH} levels deep")
    bad = _not_unicode(data)
    if bad is not None:
        raise LabelDBError(f"the request body holds text that is not valid Unicode ({bad}: a lone surrogate "
                           "such as \\ud800, which JSON can spell but no text can hold)")
    if not isinstance(data, dict):
        raise LabelDBError(f"the request body must be a JSON object with {', '.join(fields)}")
    missing = [f for f in fields if f not in data]
    if missing:
        raise LabelDBError(f"the request body lacks {', '.join(missing)} (expected {', '.join(fields)})")
    return data


def _whoami(r: _Round, who: dict) -> dict:
    return {**who, "per_pair": r.settings.per_pair, "door": r.settings.door}


def _counts(r: _Round, name: str) -> dict:
    people = team.people_labels(r.db.labels())
    return {"mine": int((people["annotator"] == name).sum()) if len(people) else 0, "pairs": len(r.known)}


async def index(request: Request):
    """The label page (its script asks the other routes for work)."""
    return HTMLResponse(pages.label_server_page(noun=_round(request).run.noun))


async def signin(request: Request):
    """Sign in with a personal token: sets the session cookie; answers who the token names."""
    data = await body(request, "token")
    token = data["token"]
    r = _round(request)
    who, session = r.db.start_session(token if isinstance(token, str) else "")
    out = JSONResponse(_whoami(r, who))
    out.set_cookie(COOKIE, session, httponly=True, samesite="strict", path="/", secure=request.url.scheme == "https")
    return out


async def signout(request: Request):
    """Sign out: the session ends on the server (its cookie, copied or kept, signs nobody in again) and the
    cookie is cleared."""
    _round(request).db.end_session(request.cookies.get(COOKIE, ""))
    out = JSONResponse({"signed_out": True})
    out.delete_cookie(COOKIE, path="/")
    return out


async def me(request: Request):
    """Who is signed in, with their counts."""
    return JSONResponse(_whoami(_round(request), person(request)))


async def next_pair(request: Request):
    """The next pair for this person (leased for lease_s), with the question and, for the metadata pool only, the
    file name and caption."""
    who, r = person(request), _round(request)
    s = r.settings
    got = r.db.next_pair(who["name"], s.per_pair, s.lease_s, s.seed, s.separate_pools)
    out: dict[str, Any] = {"done": got is None, **_counts(r, who["name"])}
    if got is not None:
        out.update(pair_id=got.pair_id, question=got.question)
        if who["pool"] == "metadata":
            meta = r.run.metadata.get(got.pair_id, {})
            out["metadata"] = {"file name": meta.get("file", ""), "caption": meta.get("caption", "")}
    return JSONResponse(out)


async def image(request: Request):
    """A pair's image, to a signed-in person; a pair outside the run's pool is 404."""
    person(request)
    r, pid = _round(request), request.path_params["pair_id"]
    if pid not in r.known:
        raise LabelDBError(f"pair {pid!r} is not in this run's pool", 404)
    path = r.run.images[pid]
    if not path.is_file():
        raise LabelDBError(f"the image of pair {pid} is missing on the server", 404)
    media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return Response(path.read_bytes(), media_type=media, headers={"Cache-Control": "private, max-age=3600"})


async def label(request: Request):
    """Record a label for a leased pair (request_id makes a retry count once)."""
    who, r = person(request), _round(request)
    data = await body(request, "pair_id", "label", "request_id")
    seconds = data.get("seconds")
    try:
        seconds = None if seconds is None else float(seconds)
    except (TypeError, ValueError) as exc:
        raise LabelDBError(f"seconds must be a number, got {seconds!r}") from exc
    if seconds is not None and not math.isfinite(seconds):
        seconds = None
    kind = "adjudication" if request.url.path.endswith("/adjudicate") else "label"
    label_id = r.db.submit(who["name"], str(data["pair_id"]), str(data["label"]), str(data.get("note", "")),
                           data["request_id"], r.settings.per_pair, r.settings.separate_pools, seconds, kind=kind)
    return JSONResponse({"id": label_id, **_counts(r, who["name"])})


async def undo(request: Request):
    """Take back this person's label (or adjudication) made with request_id, while its lease holds."""
    who, r = person(request), _round(request)
    data = await body(request, "request_id")
    pid = r.db.undo(who["name"], data["request_id"], r.settings.lease_s, kind=str(data.get("kind", "label")))
    return JSONResponse({"undone": pid, **_counts(r, who["name"])})


async def adjudicate_next(request: Request):
    """The next disagreement to settle, to an adjudicator only."""
    who, r = person(request), _round(request)
    if who["role"] != "adjudicator":
        raise LabelDBError(f"{who['name']} is not an adjudicator (the lead adds one with --adjudicator)", 403)
    queue = team.disagreements(r.db.labels(), r.db.pairs(), r.db.machine_labels())
    if queue.empty:
        return JSONResponse({"done": True, "left": 0})
    first = queue.iloc[0]
    return JSONResponse({"done": False, "left": len(queue), "pair_id": first["pair_id"],
                         "question": first["question"], "labels": first["labels"], "reason": first["reason"]})


async def progress_page(request: Request):
    """The round's progress per person and pool."""
    who, r = person(request), _round(request)
    prog = team.progress(r.db.labels(), r.db.pairs(), r.db.annotators(), r.settings.per_pair, r.settings.pools)
    return HTMLResponse(pages.label_progress_page(prog, r.settings.per_pair, r.settings.pools, lead=who["lead"]))


async def agreement_page(request: Request):
    """Agreement per pool between people and with the model judge, to the lead only."""
    who, r = person(request), _round(request)
    if not who["lead"]:           # its rows are per pool: who is in which pool is the lead's to know
        raise LabelDBError("agreement is shown to the lead (lookalike labels add … --lead)", 403)
    table = team.agreement_table(r.db.labels(), r.db.machine_labels(), seed=r.settings.seed)
    return HTMLResponse(pages.label_agreement_page(table, [team.agreement_words(x) for x in table.to_dict("records")]))


async def _replayed(request: Request, exc: Replay):
    # a retry of a change already made: the client counts it as done
    return JSONResponse({"error": str(exc), "replay": True, "result": exc.result}, status_code=exc.status)


async def _refused(request: Request, exc: LabelDBError):
    return JSONResponse({"error": str(exc)}, status_code=exc.status)


async def _database_failed(request: Request, exc: sqlite3.Error):
    # the database itself failed (disk full, locked too long): say so
    return JSONResponse({"error": f"the label database did not take the change ({exc}); nothing was recorded — try "
                                  "again, and tell whoever runs the server if it persists"}, status_code=503)


ROUTES = [
    Route("/", index),
    Route("/api/signin", signin, methods=["POST"]),
    Route("/api/signout", signout, methods=["POST"]),
    Route("/api/me", me),
    Route("/api/next", next_pair),
    Route("/api/image/{pair_id}", image),
    Route("/api/label", label, methods=["POST"]),
    Route("/api/undo", undo, methods=["POST"]),
    Route("/api/adjudicate/next", adjudicate_next),
    Route("/api/adjudicate", label, methods=["POST"]),
    Route("/progress", progress_page),
    Route("/agreement", agreement_page),
]


def create_app(run: RunPairs, db: LabelDB, settings: Settings) -> Starlette:
    """The label server for one run: the module's routes, the token backend as middleware, and the
    refusals mapped to their HTTP answers. Loads the run's pairs and the model's pre-labels into the
    database (pairs already held are kept as they are) and records the round's settings in it."""
    db.record_settings({"per_pair": settings.per_pair, "door": settings.door}, "the label server")
    db.add_pairs(run.pairs)
    if run.machine is not None and len(run.machine):
        db.set_machine_labels(run.machine)
    app = Starlette(routes=ROUTES, middleware=[Middleware(AuthenticationMiddleware, backend=TokenBackend())],
                    exception_handlers={Replay: _replayed, LabelDBError: _refused, sqlite3.Error: _database_failed})
    app.state.round = _Round(run, db, settings, set(run.pairs["pair_id"]))
    return app


def serve(run_dir: Path | str, host: str = "127.0.0.1", port: int = 8750, db: str | None = None, **overrides) -> None:
    """Run the label server until stopped (uvicorn, one process; SQLite serialises the writes)."""
    import uvicorn

    run_dir = Path(run_dir)
    require_run(run_dir)
    params = run_params(run_dir)
    loaded = load_run(run_dir)          # before the database: a folder that is no run gets none
    database = open_db(run_dir, params, db)
    settings, notes = settings_from(params, database, **overrides)
    app = create_app(loaded, database, settings)
    print(f"lookalike labels: serving {run_dir} on http://{host}:{port}/ — database {database.target}; "
          f"{settings.per_pair} label(s) per pair" + ("; judge door on (the metadata pool sees file name and caption)"
                                                       if settings.door else ""), flush=True)
    for note in notes:
        print(f"lookalike labels: {note}", flush=True)
    print("lookalike labels: " + team.round_cost(loaded.pairs, settings.per_pair, settings.pools,
                                                 database.labels()), flush=True)
    people = database.annotators()
    for line in people_lines(people, settings.door, str(run_dir)):
        print(f"lookalike labels: {line}", flush=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"lookalike labels: {host} is reachable from other machines over plain HTTP: personal tokens travel "
              "unencrypted — put the server behind TLS (a reverse proxy) outside a trusted network", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def people_lines(people: pd.DataFrame, door: bool, run: str) -> list[str]:
    """What the lead reads at start: who can sign in, and what is missing before the round can run."""
    lines = []
    can = people[people["has_token"]] if len(people) else people
    if can.empty:
        lines.append(f"nobody can sign in yet: add each person with `lookalike labels add {run} NAME --pool blind`"
                     + (" (or --pool metadata: they see file names and captions)" if door else ""))
    else:
        pools = can.groupby("pool").size().to_dict()
        lines.append("people: " + ", ".join(f"{n} in the {p} pool" for p, n in sorted(pools.items()))
                     + f"; {int((can['role'] == 'adjudicator').sum())} adjudicator(s)")
        if door and not pools.get("metadata"):
            lines.append("the judge door is on but nobody is in the metadata pool: add people with --pool metadata")
    stale = people[~people["has_token"]]["name"].tolist() if len(people) else []
    if stale:
        lines.append(f"{len(stale)} person(s) signed in by name with an earlier lookalike and have no personal token: "
                     + ", ".join(stale[:5]) + ("…" if len(stale) > 5 else "")
                     + f" — `lookalike labels add {run} NAME --pool <their pool> --new-token` gives each one")
    return lines
