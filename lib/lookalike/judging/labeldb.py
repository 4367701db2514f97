"""The team's label database: pairs to label, annotators, leases, people's labels and adjudications.

One database per run, SQLite in WAL mode by default (``<run>/labels/labels.sqlite``), or
PostgreSQL by URL (``postgresql://…``, needs psycopg) for a team server. Its schema is created and
upgraded by the versioned migrations in ``MIGRATIONS`` (table ``schema_migrations`` records what
was applied). The run's JSON Lines label store (``judging.store``) stays the record the stages read:
``export_to_store`` appends what people labelled here to it, and stage 06 does so itself when a
database is configured.

What the database guarantees, each by a constraint or one transaction, not by the caller:
- a label is committed when ``submit`` returns (SQLite: WAL, ``synchronous=FULL``), so a killed
  server or a closed browser loses nothing that was acknowledged;
- every change carries a request id, recorded in the same transaction (``requests``): a replayed
  request is refused with what it did the first time, so a retry after a lost answer never adds a
  label twice;
- one live label per (pair, person, kind) — a partial unique index; an undo retracts (keeps the
  row, marks it), it never deletes;
- a pair is offered to at most ``per_pair`` people per pool at once: claims run one at a time
  (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a transaction-scoped advisory lock) and count the live
  labels plus the other people's unexpired leases;
- machine labels live in their own table (``machine_labels``) and are only ever read beside
  people's for agreement: nothing a model says can replace a person's label here.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
import time as _time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Iterable, Iterator, Mapping

import pandas as pd

from lookalike.vocab import LABELS

POOLS = ("blind", "metadata")       # metadata: this person sees the file name and caption beside the page
KINDS = ("label", "adjudication")
ROLES = ("annotator", "adjudicator")
DEFAULT_FILE = Path("labels") / "labels.sqlite"
REQUEST_ID = re.compile(r"[A-Za-z0-9_.:-]{8,80}")
# the round's settings and how each is read back from its text in the settings table
SETTINGS = {"per_pair": int, "door": lambda text: text == "true"}
TOKEN_BYTES = 24                    # secrets.token_urlsafe: 32 characters, 192 random bits
MAX_TOKEN = 200                     # longer is not a token this server made: refused before hashing
NAME = re.compile(r"[^\x00-\x1f<>]{1,60}")

# Each migration: (version, what it does, statements). "{id}" is the dialect's auto-increment key.
MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "pairs, annotators, leases, people's labels, requests, machine labels", [
        """CREATE TABLE pairs (
             pair_id TEXT PRIMARY KEY, query_id TEXT NOT NULL, unit_id TEXT NOT NULL,
             question_sha TEXT NOT NULL, question TEXT NOT NULL, flagged TEXT NOT NULL DEFAULT '',
             added TEXT NOT NULL)""",
        """CREATE TABLE annotators (
             name TEXT PRIMARY KEY, pool TEXT NOT NULL CHECK (pool IN ('blind', 'metadata')),
             role TEXT NOT NULL CHECK (role IN ('annotator', 'adjudicator')), joined TEXT NOT NULL)""",
        """CREATE TABLE leases (
             pair_id TEXT NOT NULL REFERENCES pairs(pair_id), annotator TEXT NOT NULL REFERENCES annotators(name),
             kind TEXT NOT NULL, expires DOUBLE PRECISION NOT NULL, PRIMARY KEY (pair_id, annotator, kind))""",
        """CREATE TABLE labels (
             id {id}, request_id TEXT NOT NULL UNIQUE, pair_id TEXT NOT NULL REFERENCES pairs(pair_id),
             annotator TEXT NOT NULL REFERENCES annotators(name), pool TEXT NOT NULL,
             kind TEXT NOT NULL CHECK (kind IN ('label', 'adjudication')),
             label TEXT NOT NULL CHECK (label IN ('sufficient', 'supporting', 'irrelevant')),
             note TEXT NOT NULL DEFAULT '', time TEXT NOT NULL, seconds DOUBLE PRECISION,
             retracted INTEGER NOT NULL DEFAULT 0, retracted_time TEXT)""",
        "CREATE UNIQUE INDEX labels_live ON labels (pair_id, annotator, kind) WHERE retracted = 0",
        """CREATE TABLE requests (
             request_id TEXT PRIMARY KEY, annotator TEXT NOT NULL, action TEXT NOT NULL, result TEXT NOT NULL,
             time TEXT NOT NULL)""",
        """CREATE TABLE machine_labels (
             pair_id TEXT NOT NULL REFERENCES pairs(pair_id), judge TEXT NOT NULL, label TEXT NOT NULL,
             PRIMARY KEY (pair_id, judge))""",
    ]),
    (2, "personal tokens, leads, and the round's settings", [
        "ALTER TABLE annotators ADD COLUMN token_sha TEXT",
        "ALTER TABLE annotators ADD COLUMN lead INTEGER NOT NULL DEFAULT 0",
        "CREATE UNIQUE INDEX annotators_token ON annotators (token_sha)",
        """CREATE TABLE settings (
             key TEXT PRIMARY KEY, value TEXT NOT NULL, source TEXT NOT NULL, time TEXT NOT NULL)""",
    ]),
    (3, "browser sessions (the sign-in cookie names a session, never the token)", [
        """CREATE TABLE sessions (
             session_sha TEXT PRIMARY KEY, annotator TEXT NOT NULL REFERENCES annotators(name),
             token_sha TEXT NOT NULL, started TEXT NOT NULL)""",
    ]),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


class LabelDBError(ValueError):
    """A request the database refuses; ``status`` is the HTTP status a server answers with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class Replay(LabelDBError):
    """A request id already applied: nothing was changed again."""

    def __init__(self, request_id: str, result: str, when: str):
        super().__init__(f"request {request_id} was already applied at {when} ({result}); nothing was changed again", 409)
        self.result = result


@dataclass(frozen=True)
class Assignment:
    """What one person is shown next: the pair's opaque id and its question (nothing else is blind-safe)."""

    pair_id: str
    question: str
    kind: str


def now_iso() -> str:
    """Now, in UTC, to the millisecond: the time every label and event in the database is stamped with."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def resolve(db: str | Path | None, run_dir: Path | str) -> str:
    """The database a run uses: a PostgreSQL URL as given; else a file (a relative path is under the
    run folder; empty means ``<run>/labels/labels.sqlite``)."""
    text = str(db or "").strip()
    if text.startswith(("postgresql://", "postgres://")):
        return text
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///"):]
    path = Path(text) if text else DEFAULT_FILE
    return str(path if path.is_absolute() else Path(run_dir) / path)


def existing(db: str | Path | None, run_dir: Path | str) -> LabelDB | None:
    """The run's label database when there is one (a PostgreSQL URL, or a SQLite file that exists);
    None when nobody has started a label server for this run."""
    target = resolve(db, run_dir)
    if target.startswith(("postgresql://", "postgres://")) or Path(target).is_file():
        return LabelDB(target)
    return None


def _sqlite_header(path: Path) -> bool:
    """Whether a file starts as every SQLite database does."""
    try:
        with path.open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def describe(target: str, run_dir: Path | str) -> str:
    """Where a database is, for a report: a file relative to the run folder, a URL without its password."""
    if target.startswith(("postgresql://", "postgres://")):
        return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", target)
    try:
        return str(Path(target).resolve().relative_to(Path(run_dir).resolve()))
    except ValueError:
        return target


class LabelDB:
    """The label database at ``target`` (a file path, or a postgresql:// URL)."""

    def __init__(self, target: str | Path, migrate: bool = True):
        self.target = str(target)
        self._orders: dict[tuple, list[str]] = {}
        self.postgres = self.target.startswith(("postgresql://", "postgres://"))
        if self.postgres:
            try:
                import psycopg  # noqa: F401  (optional: only a team server on PostgreSQL needs it)
            except ImportError as exc:
                raise LabelDBError(f"{self.target}: a PostgreSQL database needs the psycopg package "
                                   "(pip install 'psycopg[binary]')") from exc
        else:
            path = Path(self.target)
            if path.is_dir():
                raise LabelDBError(f"{self.target} is a folder; the label database is a file (for example "
                                   f"{path / 'labels.sqlite'}) or a postgresql:// URL")
            if path.is_file() and path.stat().st_size and not _sqlite_header(path):
                # SQLite would turn a short file of anything else into a database: a user's file is never overwritten
                raise LabelDBError(f"{describe(self.target, '.')}: not a lookalike label database (not a SQLite file; "
                                   "nothing was written to it) — give --db a new file path or an existing label "
                                   "database", 500)
        if migrate and not self.postgres:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LabelDBError(f"{self.target}: cannot make the database's folder {path.parent} "
                                   f"({exc.strerror or exc}); give a path whose folders you can create") from None
        if migrate:
            with self._refusals():
                self.migrate()
                self._probe_write()

    def _probe_write(self) -> None:
        """One write, rolled back: a database the server may read but not change (a read-only file or
        folder, a read-only mount) is refused when opened, not at the first person's label."""
        con = self._connect()
        try:
            con.execute("BEGIN")
            con.execute(self._sql("INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)"),
                        (-1, "write probe", now_iso()))
            con.execute("ROLLBACK")
        finally:
            con.close()

    @contextmanager
    def _refusals(self) -> Iterator[None]:
        """A database that cannot be read as a label database is refused with its name and why."""
        where = describe(self.target, ".")
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "read-only" in str(exc):
                raise LabelDBError(f"{where}: the database is read-only here ({exc}); the label server writes "
                                   "every label to it — make the file and its folder writable (SQLite keeps "
                                   "-wal and -shm files beside it) or give --db another path", 500) from exc
            if "unable to open" in str(exc):
                raise LabelDBError(f"{where}: cannot open the database file ({exc}); give --db a file path in a "
                                   "folder you can write", 500) from exc
            raise LabelDBError(f"{where}: not a lookalike label database ({exc})", 500) from exc
        except sqlite3.DatabaseError as exc:
            raise LabelDBError(f"{where}: not a lookalike label database ({exc})", 500) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("psycopg"):
                raise LabelDBError(f"{where}: the PostgreSQL database did not answer as expected ({exc})", 500) from exc
            raise

    def inspect(self) -> dict:
        """What the database holds, read without changing it: schema version, pairs, live labels,
        people. Refused (LabelDBError) when it cannot be read or is newer than this lookalike."""
        with self._refusals():
            version = self.version()
            if version > SCHEMA_VERSION:
                raise LabelDBError(f"{describe(self.target, '.')}: schema version {version} is newer than this "
                                   f"lookalike knows ({SCHEMA_VERSION}); upgrade lookalike", 500)
            if version == 0:
                return {"version": 0, "pairs": 0, "labels": 0, "people": 0}
            counts = self.query("SELECT (SELECT COUNT(*) FROM pairs) AS pairs, "
                                "(SELECT COUNT(*) FROM labels WHERE retracted = 0) AS labels, "
                                "(SELECT COUNT(*) FROM annotators) AS people").iloc[0]
            return {"version": version, **{k: int(v) for k, v in counts.items()}}

    # ------------------------------------------------------------------ connections

    def _connect(self):
        if self.postgres:
            import psycopg
            return psycopg.connect(self.target, autocommit=True)
        con = sqlite3.connect(self.target, timeout=30, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")        # a committed label survives a killed process or machine
        con.execute("PRAGMA foreign_keys=ON")
        con.execute("PRAGMA busy_timeout=30000")
        return con

    def _sql(self, sql: str) -> str:
        return to_paramstyle(sql, self.paramstyle)

    @property
    def paramstyle(self) -> str:
        """The driver's own DB-API parameter style (sqlite3: qmark; psycopg: pyformat)."""
        if self.postgres:
            import psycopg
            return psycopg.paramstyle
        return sqlite3.paramstyle

    @contextmanager
    def transaction(self, serial: bool = False) -> Iterator[_Tx]:
        """One transaction; serial: one at a time against every other serial transaction (claims)."""
        con = self._connect()
        try:
            if self.postgres:
                con.execute("BEGIN")
                if serial:
                    con.execute("SELECT pg_advisory_xact_lock(87500)")
            else:
                con.execute("BEGIN IMMEDIATE" if serial else "BEGIN")
            tx = _Tx(con, self)
            try:
                yield tx
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()

    def query(self, sql: str, params: Iterable = ()) -> pd.DataFrame:
        """Rows of a SELECT as a frame (parameters bound by the driver's own style)."""
        con = self._connect()
        try:
            cur = con.execute(self._sql(sql), tuple(params))
            cols = [d[0] for d in cur.description]
            return pd.DataFrame(cur.fetchall(), columns=cols)
        finally:
            con.close()

    # ------------------------------------------------------------------ schema

    def version(self) -> int:
        """The schema version this database is at (0 before any migration ran)."""
        with self.transaction() as tx:
            if not tx.table_exists("schema_migrations"):
                return 0
            return int(tx.one("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")[0])

    def migrate(self) -> int:
        """Apply every migration not yet applied, each in one transaction; returns the version."""
        auto = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY" if self.postgres else "INTEGER PRIMARY KEY AUTOINCREMENT"
        with self.transaction(serial=True) as tx:
            if not tx.table_exists("schema_migrations"):
                tx.run("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied TEXT NOT NULL)")
            have = int(tx.one("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")[0])
            if have > SCHEMA_VERSION:
                raise LabelDBError(f"{self.target}: schema version {have} is newer than this lookalike knows "
                                   f"({SCHEMA_VERSION}); upgrade lookalike", 500)
            for version, name, statements in MIGRATIONS:
                if version <= have:
                    continue
                for statement in statements:
                    tx.run(statement.replace("{id}", auto))
                tx.run("INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)", (version, name, now_iso()))
        return SCHEMA_VERSION

    # ------------------------------------------------------------------ pairs, machine labels, people

    def add_pairs(self, pairs: pd.DataFrame) -> int:
        """Add pairs (pair_id, query_id, unit_id, question_sha, question, flagged); ones held are kept as
        they are. Returns how many were new."""
        stamp = now_iso()
        with self.transaction(serial=True) as tx:
            before = int(tx.one("SELECT COUNT(*) FROM pairs")[0])
            for r in pairs.to_dict("records"):
                tx.run("INSERT INTO pairs (pair_id, query_id, unit_id, question_sha, question, flagged, added) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pair_id) DO NOTHING",
                       (r["pair_id"], r["query_id"], r["unit_id"], r["question_sha"], r["question"],
                        str(r.get("flagged", "") or ""), stamp))
            return int(tx.one("SELECT COUNT(*) FROM pairs")[0]) - before

    def set_machine_labels(self, labels: pd.DataFrame) -> int:
        """A judge's labels of pairs held here (pair_id, judge, label), for agreement only."""
        with self.transaction(serial=True) as tx:
            known = {r[0] for r in tx.all("SELECT pair_id FROM pairs")}
            n = 0
            for r in labels.to_dict("records"):
                if r["pair_id"] not in known:
                    continue
                tx.run("INSERT INTO machine_labels (pair_id, judge, label) VALUES (?, ?, ?) "
                       "ON CONFLICT (pair_id, judge) DO UPDATE SET label = excluded.label",
                       (r["pair_id"], r["judge"], r["label"]))
                n += 1
            return n

    def add_person(self, name: str, pool: str, role: str = "annotator", lead: bool = False,
                   new_token: bool = False) -> tuple[dict, str]:
        """Add a person the lead names, in the pool the lead chooses, and make their personal token;
        returns (the person, the token). The token is shown once: the database keeps only its SHA-256.
        A person's pool never changes (their labels would mix what the two pools saw); ``new_token``
        gives someone already here a fresh token, and the old one stops working. An adjudicator is
        blind: their decisions enter the qrels, so nobody who saw file names and captions makes them."""
        name = str(name).strip()
        if not NAME.fullmatch(name):
            raise LabelDBError("a name is 1 to 60 characters, without < > or control characters")
        if pool not in POOLS:
            raise LabelDBError(f"pool {pool!r} is not one of {', '.join(POOLS)}")
        if role not in ROLES:
            raise LabelDBError(f"role {role!r} is not one of {', '.join(ROLES)}")
        if role == "adjudicator" and pool == "metadata":
            raise LabelDBError("an adjudicator's decisions enter the qrels, so an adjudicator is blind: the metadata "
                               "pool saw file names and captions (add the adjudicator with --pool blind)")
        token = secrets.token_urlsafe(TOKEN_BYTES)
        with self.transaction(serial=True) as tx:
            row = tx.one("SELECT name, pool, role, joined, lead FROM annotators WHERE name = ?", (name,))
            if row is not None and not new_token:
                raise LabelDBError(f"{name} is already in this label database ({row[1]} pool, {row[2]}); --new-token "
                                   "gives them a new token (the old one stops working)", 409)
            if row is not None and row[1] != pool:
                raise LabelDBError(f"{name} is in the {row[1]} pool; a person's pool never changes (their labels "
                                   f"would mix what the two pools saw) — add them under another name", 409)
            if row is None:
                tx.run("INSERT INTO annotators (name, pool, role, joined, token_sha, lead) VALUES (?, ?, ?, ?, ?, ?)",
                       (name, pool, role, now_iso(), token_digest(token), int(lead)))
            else:
                if row[2] != role and role == "annotator" and tx.one(
                        "SELECT 1 FROM labels WHERE annotator = ? AND kind = 'adjudication' AND retracted = 0",
                        (name,)) is not None:
                    raise LabelDBError(f"{name} has adjudicated; they stay an adjudicator (pass --adjudicator)", 409)
                tx.run("UPDATE annotators SET token_sha = ?, role = ?, lead = ? WHERE name = ?",
                       (token_digest(token), role, int(lead or bool(row[4])), name))
            if pool == "metadata" and not self._setting(tx, "door"):
                self._set(tx, "door", True, f"a metadata-pool person was added ({name})")
        return self.annotator(name), token

    def person_by_token(self, token: str | bytes | None) -> dict:
        """The person a personal token belongs to; 401 for anything else (no token, an unknown one, bytes
        in any encoding, any length)."""
        if isinstance(token, str):
            token = token.encode("utf-8", "surrogateescape")
        if not token or len(token) > MAX_TOKEN:
            raise LabelDBError("sign in with your personal token (the lead makes it with `lookalike labels add`)", 401)
        df = self.query("SELECT name, pool, role, joined, lead FROM annotators WHERE token_sha = ?",
                        (hashlib.sha256(token).hexdigest(),))
        if df.empty:
            raise LabelDBError("this token is not known to the label server (ask the lead for yours: "
                               "`lookalike labels add`)", 401)
        return _person(df.iloc[0])

    def start_session(self, token: str) -> tuple[dict, str]:
        """Sign a person in with their personal token: (the person, a new session id for the browser's cookie).
        The database keeps only the session id's SHA-256, beside the token's it was made with."""
        who = self.person_by_token(token)
        session = secrets.token_urlsafe(TOKEN_BYTES)
        with self.transaction(serial=True) as tx:
            tx.run("INSERT INTO sessions (session_sha, annotator, token_sha, started) VALUES (?, ?, ?, ?)",
                   (token_digest(session), who["name"], token_digest(token), now_iso()))
        return who, session

    def person_by_session(self, session: str | None) -> dict:
        """The person a browser session belongs to; 401 when it ended (signed out) or its token was replaced
        since (labels add --new-token), or for anything that is not a session this server made."""
        text = session if isinstance(session, str) else ""
        if not text or len(text) > MAX_TOKEN:
            raise LabelDBError("sign in with your personal token (the lead makes it with `lookalike labels add`)", 401)
        df = self.query("SELECT a.name, a.pool, a.role, a.joined, a.lead FROM sessions s JOIN annotators a "
                        "ON a.name = s.annotator AND a.token_sha = s.token_sha WHERE s.session_sha = ?",
                        (hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest(),))
        if df.empty:
            raise LabelDBError("your session has ended (you signed out, or the lead gave you a new token): sign in "
                               "again with your personal token", 401)
        return _person(df.iloc[0])

    def end_session(self, session: str | None) -> None:
        """Sign a browser session out: its cookie, kept or copied, signs nobody in again."""
        text = session if isinstance(session, str) else ""
        if text and len(text) <= MAX_TOKEN:
            with self.transaction(serial=True) as tx:
                tx.run("DELETE FROM sessions WHERE session_sha = ?",
                       (hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest(),))

    def annotator(self, name: str) -> dict:
        """The person named name (name, pool, role, joined, lead); LabelDBError (401) when nobody of that name
        exists."""
        df = self.query("SELECT name, pool, role, joined, lead FROM annotators WHERE name = ?", (name,))
        if df.empty:
            raise LabelDBError(f"nobody named {name!r} is in this label database", 401)
        return _person(df.iloc[0])

    # ------------------------------------------------------------------ the round's settings

    def settings(self) -> dict:
        """The round's settings as recorded (per_pair, door): what the server ran with, which stage 06,
        the export and the summary read. Empty before anything was recorded."""
        with self.transaction() as tx:
            return {k: SETTINGS[k](v) for k, v in tx.all("SELECT key, value FROM settings") if k in SETTINGS}

    def record_settings(self, values: Mapping[str, object], source: str, only_new: bool = False) -> list[str]:
        """Record the round's settings (only_new: only those not recorded yet, as params seed a new
        database); returns what changed, in words, for whoever changed it to read."""
        changed = []
        with self.transaction(serial=True) as tx:
            for key, value in values.items():
                if key not in SETTINGS or value is None:
                    continue
                have = self._setting(tx, key)
                if have is None or (not only_new and have != value):
                    self._set(tx, key, value, source)
                    if have is not None:
                        changed.append(f"{key} {_text(have)} → {_text(value)} ({source})")
        return changed

    @staticmethod
    def _setting(tx: _Tx, key: str):
        row = tx.one("SELECT value FROM settings WHERE key = ?", (key,))
        return None if row is None else SETTINGS[key](row[0])

    @staticmethod
    def _set(tx: _Tx, key: str, value, source: str) -> None:
        tx.run("INSERT INTO settings (key, value, source, time) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE "
               "SET value = excluded.value, source = excluded.source, time = excluded.time",
               (key, _text(value), source, now_iso()))

    # ------------------------------------------------------------------ the queue

    def next_pair(self, name: str, per_pair: int, lease_s: float, seed: int, separate_pools: bool) -> Assignment | None:
        """The pair this person labels next, leased to them for lease_s seconds: the one they already
        hold, else, among the pairs they have not labelled that have a free slot (live labels plus other
        people's unexpired leases below per_pair — counted within their pool when the pools are
        separate), one others have begun (most begun first, the other pool's labels counting too),
        then the first in their own shuffled order. None when nothing is left for them."""
        person = self.annotator(name)
        clock = _time.time()
        with self.transaction(serial=True) as tx:
            tx.run("DELETE FROM leases WHERE expires < ?", (clock,))
            held = tx.one("SELECT l.pair_id, p.question FROM leases l JOIN pairs p ON p.pair_id = l.pair_id "
                          "WHERE l.annotator = ? AND l.kind = 'label'", (name,))
            if held is not None:
                tx.run("UPDATE leases SET expires = ? WHERE pair_id = ? AND annotator = ? AND kind = 'label'",
                       (clock + lease_s, held[0], name))
                return Assignment(held[0], held[1], "label")
            pool_clause = "AND pool = ?" if separate_pools else ""
            pool_args = (person["pool"],) if separate_pools else ()
            filled: dict[str, int] = {}
            for pid, n in tx.all(f"SELECT pair_id, COUNT(*) FROM labels WHERE kind = 'label' AND retracted = 0 "
                                 f"{pool_clause} GROUP BY pair_id", pool_args):
                filled[pid] = filled.get(pid, 0) + int(n)
            lease_pool = ("AND a.pool = ?" if separate_pools else "")
            for pid, n in tx.all(f"SELECT l.pair_id, COUNT(*) FROM leases l JOIN annotators a ON a.name = l.annotator "
                                 f"WHERE l.kind = 'label' AND l.annotator <> ? {lease_pool} GROUP BY l.pair_id",
                                 (name, *pool_args)):
                filled[pid] = filled.get(pid, 0) + int(n)
            started = filled
            if separate_pools:        # the other pool's work counts for the order (the door compares the pools)
                started = dict(filled)
                for pid, n in tx.all("SELECT pair_id, COUNT(*) FROM labels WHERE kind = 'label' AND retracted = 0 "
                                     "AND pool <> ? GROUP BY pair_id", pool_args):
                    started[pid] = started.get(pid, 0) + int(n)
            mine = {r[0] for r in tx.all("SELECT pair_id FROM labels WHERE annotator = ? AND kind = 'label' "
                                         "AND retracted = 0", (name,))}
            free = lambda pid: pid not in mine and filled.get(pid, 0) < per_pair  # noqa: E731
            # pairs others have begun come first, so pairs are finished (and agreement measured) as the team
            # goes rather than only at the end; within that, and after it, this person's own shuffled order
            begun = sorted((pid for pid, n in started.items() if n > 0 and free(pid)),
                           key=lambda pid: (-started[pid], shuffle_key(seed, name, pid)))
            pick = begun[0] if begun else next((pid for pid in self._order(tx, seed, name) if free(pid)), None)
            if pick is None:
                return None
            tx.run("INSERT INTO leases (pair_id, annotator, kind, expires) VALUES (?, ?, 'label', ?)",
                   (pick, name, clock + lease_s))
            return Assignment(pick, tx.one("SELECT question FROM pairs WHERE pair_id = ?", (pick,))[0], "label")

    def _order(self, tx: _Tx, seed: int, name: str) -> list[str]:
        """This person's shuffled order of every pair, kept while the pairs stay the same (hashing every
        pair on every request costs about 100 ms at 50,000 pairs)."""
        count = int(tx.one("SELECT COUNT(*) FROM pairs")[0])
        key = (seed, name, count)
        if key not in self._orders:
            ids = [r[0] for r in tx.all("SELECT pair_id FROM pairs")]
            self._orders[key] = sorted(ids, key=lambda pid: shuffle_key(seed, name, pid))
        return self._orders[key]

    def submit(self, name: str, pair_id: str, label: str, note: str, request_id: str, per_pair: int,
               separate_pools: bool, seconds: float | None = None, kind: str = "label") -> int:
        """Record one label (or an adjudication) and free the lease, in one transaction; returns its id.
        Refused: an unknown pair or label, a replayed request id, a pair this person already labelled,
        and, when this person holds no unexpired lease on the pair, a pair whose slots are taken by
        live labels and other people's unexpired leases together."""
        check_request_id(request_id)
        if label not in LABELS:
            raise LabelDBError(f"label {label!r} is not one of {', '.join(LABELS)}")
        if kind not in KINDS:
            raise LabelDBError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
        person = self.annotator(name)
        if kind == "adjudication" and person["role"] != "adjudicator":
            raise LabelDBError(f"{name} is not an adjudicator (the lead adds one with --adjudicator)", 403)
        note = str(note or "")[:2000]
        stamp = now_iso()
        with self.transaction(serial=True) as tx:
            _replay(tx, request_id)
            if tx.one("SELECT 1 FROM pairs WHERE pair_id = ?", (pair_id,)) is None:
                raise LabelDBError(f"pair {pair_id!r} is not in this run's pool", 404)
            if tx.one("SELECT id FROM labels WHERE pair_id = ? AND annotator = ? AND kind = ? AND retracted = 0",
                      (pair_id, name, kind)) is not None:
                raise LabelDBError(f"{name} has already labelled pair {pair_id} (undo it first to change it)", 409)
            if kind == "label":
                # a slot counts live labels plus every unexpired lease, here as in next_pair: a person whose
                # lease ran out may still label, but only into a slot nobody else holds or has filled
                clock = _time.time()
                leased = tx.one("SELECT 1 FROM leases WHERE pair_id = ? AND annotator = ? AND kind = 'label' "
                                "AND expires >= ?", (pair_id, name, clock)) is not None
                pool_clause = "AND pool = ?" if separate_pools else ""
                args = (pair_id, person["pool"]) if separate_pools else (pair_id,)
                live = int(tx.one(f"SELECT COUNT(*) FROM labels WHERE pair_id = ? AND kind = 'label' AND retracted = 0 "
                                  f"{pool_clause}", args)[0])
                lease_pool = "AND a.pool = ?" if separate_pools else ""
                held = int(tx.one(f"SELECT COUNT(*) FROM leases l JOIN annotators a ON a.name = l.annotator "
                                  f"WHERE l.pair_id = ? AND l.kind = 'label' AND l.annotator <> ? AND l.expires >= ? "
                                  f"{lease_pool}", (pair_id, name, clock, *args[1:]))[0])
                if not leased and live >= per_pair:
                    raise LabelDBError(f"pair {pair_id} already has its {per_pair} label(s) from other people "
                                       "(your lease had expired); ask for the next pair", 409)
                if not leased and live + held >= per_pair:
                    raise LabelDBError(f"pair {pair_id} is leased to someone else now ({held} unexpired lease(s) "
                                       f"beside {live} label(s); {per_pair} per pair), and you hold no lease on it "
                                       "(yours had expired, or it was never given to you); ask for the next pair", 409)
            cur = tx.run("INSERT INTO labels (request_id, pair_id, annotator, pool, kind, label, note, time, seconds) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                         (request_id, pair_id, name, person["pool"], kind, label, note, stamp, seconds))
            label_id = int(cur.fetchone()[0])
            tx.run("DELETE FROM leases WHERE pair_id = ? AND annotator = ? AND kind = ?", (pair_id, name, kind))
            tx.run("INSERT INTO requests (request_id, annotator, action, result, time) VALUES (?, ?, ?, ?, ?)",
                   (request_id, name, "label", f"{kind} {label_id} of pair {pair_id}", stamp))
        return label_id

    def undo(self, name: str, request_id: str, lease_s: float, kind: str = "label") -> str | None:
        """Retract this person's latest live label (kept, marked retracted) and lease its pair back to
        them so it is shown again; returns the pair id, or None when they have nothing to undo."""
        check_request_id(request_id)
        self.annotator(name)
        stamp = now_iso()
        with self.transaction(serial=True) as tx:
            _replay(tx, request_id)
            last = tx.one("SELECT id, pair_id FROM labels WHERE annotator = ? AND kind = ? AND retracted = 0 "
                          "ORDER BY id DESC LIMIT 1", (name, kind))
            result = "nothing to undo"
            if last is not None:
                tx.run("UPDATE labels SET retracted = 1, retracted_time = ? WHERE id = ?", (stamp, last[0]))
                tx.run("DELETE FROM leases WHERE annotator = ? AND kind = ?", (name, kind))
                tx.run("INSERT INTO leases (pair_id, annotator, kind, expires) VALUES (?, ?, ?, ?)",
                       (last[1], name, kind, _time.time() + lease_s))
                result = f"retracted {kind} {last[0]} of pair {last[1]}"
            tx.run("INSERT INTO requests (request_id, annotator, action, result, time) VALUES (?, ?, ?, ?, ?)",
                   (request_id, name, "undo", result, stamp))
        return None if last is None else last[1]

    # ------------------------------------------------------------------ reading

    def pairs(self) -> pd.DataFrame:
        """Every pair the database serves (pair id, question, unit, the question's sha, whether it is
        flagged)."""
        return self.query("SELECT pair_id, query_id, unit_id, question_sha, question, flagged FROM pairs ORDER BY pair_id")

    def labels(self, live: bool = True) -> pd.DataFrame:
        """People's labels joined to their pairs (live only by default), in the order they were written."""
        where = "WHERE l.retracted = 0" if live else ""
        return self.query(f"SELECT l.id, l.pair_id, p.query_id, p.unit_id, p.question_sha, l.annotator, l.pool, l.kind, "
                          f"l.label, l.note, l.time, l.seconds, l.retracted FROM labels l JOIN pairs p "
                          f"ON p.pair_id = l.pair_id {where} ORDER BY l.id")

    def machine_labels(self) -> pd.DataFrame:
        """The machine judges' labels loaded with the pool, per pair and judge."""
        return self.query("SELECT pair_id, judge, label FROM machine_labels ORDER BY pair_id, judge")

    def annotators(self) -> pd.DataFrame:
        """Everyone in the database (never their token's digest): name, pool, role, joined, lead, and
        whether they have a personal token (people from before tokens signed in by name and need one)."""
        df = self.query("SELECT name, pool, role, joined, lead, CASE WHEN token_sha IS NULL THEN 0 ELSE 1 END AS "
                        "has_token FROM annotators ORDER BY name")
        return df.astype({"lead": bool, "has_token": bool})


class _Tx:
    def __init__(self, con, db: LabelDB):
        self.con, self.db = con, db

    def run(self, sql: str, params: Iterable = ()):
        return self.con.execute(self.db._sql(sql), tuple(params))

    def one(self, sql: str, params: Iterable = ()):
        return self.run(sql, params).fetchone()

    def all(self, sql: str, params: Iterable = ()) -> list:
        return self.run(sql, params).fetchall()

    def table_exists(self, name: str) -> bool:
        if self.db.postgres:
            return self.one("SELECT to_regclass(?)", (name,))[0] is not None
        return self.one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)) is not None


def _replay(tx: _Tx, request_id: str) -> None:
    seen = tx.one("SELECT result, time FROM requests WHERE request_id = ?", (request_id,))
    if seen is not None:
        raise Replay(request_id, seen[0], seen[1])


_SQL_PIECES = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|\?|%|[^'\"?%-]+|-")


def to_paramstyle(sql: str, style: str) -> str:
    """SQL written once with ``?`` placeholders, in the driver's DB-API paramstyle: qmark as it is;
    format / pyformat (psycopg) with each ``?`` as ``%s`` and each literal ``%`` doubled, which such
    drivers otherwise read as a placeholder. Quoted literals, quoted identifiers and comments are
    kept as written (a ``?`` inside them is not a placeholder)."""
    if style == "qmark":
        return sql
    if style not in ("format", "pyformat"):
        raise LabelDBError(f"the database driver's paramstyle {style!r} is not one lookalike speaks "
                           "(qmark, format, pyformat)", 500)
    out = []
    for piece in _SQL_PIECES.findall(sql):
        if piece == "?":
            out.append("%s")
        elif piece[0] in "'\"-" and len(piece) > 1 or piece == "%":
            out.append(piece.replace("%", "%%"))
        else:
            out.append(piece)
    if "".join(_SQL_PIECES.findall(sql)) != sql:
        raise LabelDBError(f"an SQL statement could not be read for its placeholders: {sql[:80]!r}", 500)
    return "".join(out)


def token_digest(token: str) -> str:
    """The sha256 of a token: the database keeps only this, never the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _person(row) -> dict:
    return {"name": str(row["name"]), "pool": str(row["pool"]), "role": str(row["role"]), "joined": str(row["joined"]),
            "lead": bool(int(row["lead"]))}


def _text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def check_request_id(request_id: str) -> None:
    """Refuse a request id that is not 8 to 80 letters, digits or . _ : - (one fresh id per change; a retry
    resends it)."""
    if not isinstance(request_id, str) or not REQUEST_ID.fullmatch(request_id):
        raise LabelDBError("request_id must be 8 to 80 letters, digits or . _ : - (one fresh id per change; "
                           "a retry sends the same one)")


def shuffle_key(seed: int, name: str, pair_id: str) -> str:
    """A person's own shuffled order of the pool: seeded, so a restart shows the same order."""
    return hashlib.sha256(f"{seed}\0{name}\0{pair_id}".encode()).hexdigest()


def pool_pairs(pool: pd.DataFrame, questions: pd.DataFrame, flagged: Mapping[tuple[str, str], str] | None = None
               ) -> pd.DataFrame:
    """Stage 06's pool (query_id, unit_id) as the database's pairs, each with its opaque pair id (the
    offline page's: query, unit and question text hashed) and the judge that flagged it, if any."""
    from lookalike.judging.store import pair_id, question_sha

    text = dict(zip(questions["query_id"], questions["text"].astype(str)))
    rows = []
    for q, u in zip(pool["query_id"], pool["unit_id"]):
        if q not in text:
            continue
        rows.append({"pair_id": pair_id(q, u, text[q]), "query_id": q, "unit_id": u,
                     "question_sha": question_sha(text[q]), "question": text[q],
                     "flagged": (flagged or {}).get((q, u), "")})
    return pd.DataFrame(rows, columns=["pair_id", "query_id", "unit_id", "question_sha", "question", "flagged"])
