"""``lookalike labels``: the run's labels.

- ``import FILE --run-dir outputs/<run>``: merge a labelling-page export into the label store;
- ``add RUN_DIR NAME --pool blind|metadata``: a person on the team, with the personal token they sign
  in with (printed once);
- ``plan RUN_DIR --people N``: what a round costs before the first label — pairs, labels, hours, and
  the interval width the labels buy;
- ``serve RUN_DIR``: the team label server (blind queues, two pools for the judge door, agreement,
  adjudication, progress) over the run's label database;
- ``export RUN_DIR``: the database's people's labels into the store's JSON Lines, with the agreement
  and progress tables beside it (stage 06 does the same export when it runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lookalike.cli import options
from lookalike.judging.store import LabelError, LabelStore, import_export


def main(argv: list[str]) -> int:
    """``lookalike labels``: the label store's commands and the team label server; returns the exit status."""
    parser = argparse.ArgumentParser(prog="lookalike labels", description="The label store and the team label server.")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the team label server for a run (after stage 06)")
    s.add_argument("run_dir", help="the run folder, e.g. outputs/demo")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only; "
                                                       "0.0.0.0 lets the team reach it — behind TLS outside a "
                                                       "trusted network)")
    s.add_argument("--port", type=options.whole(1, 65535), default=8750)
    s.add_argument("--db", default=None, help="the database: a file (default <run>/labels/labels.sqlite, or the run's "
                                              "labels.db) or postgresql://user:password@host/name")
    s.add_argument("--per-pair", type=options.whole(1), default=None,
                   help="people per pair in each pool (default: the label database's; a new one takes the run's "
                        "labels.per_pair); a change is recorded in the database")
    s.add_argument("--door", action=argparse.BooleanOptionalAction, default=None,
                   help="two pools: the metadata pool sees file name and caption (default: the database's; a new one "
                        "takes the run's labels.door)")
    a = sub.add_parser("add", help="add a person to the run's label database and print their personal token (once)")
    a.add_argument("run_dir", help="the run folder, e.g. outputs/demo")
    a.add_argument("name", help="the person's name as the team knows them (1 to 60 characters)")
    a.add_argument("--pool", required=True, choices=("blind", "metadata"),
                   help="blind: the unit (page, photo) and question only; metadata: also each unit's file name and "
                        "caption (the judge door; their labels never reach the qrels)")
    a.add_argument("--adjudicator", action="store_true", help="settles the blind pool's disagreements (blind only)")
    a.add_argument("--lead", action="store_true", help="sees who is in which pool on the progress and agreement pages")
    a.add_argument("--new-token", action="store_true", help="a new token for someone already added (the old one "
                                                            "stops working)")
    a.add_argument("--db", default=None, help="the database (default: the run's labels.db, else "
                                              "<run>/labels/labels.sqlite)")
    pl = sub.add_parser("plan", help="what a round of labelling costs, before the first label")
    pl.add_argument("run_dir", help="the run folder, e.g. outputs/demo (after stage 06)")
    pl.add_argument("--people", type=options.whole(1), required=True, help="people who will label")
    pl.add_argument("--per-pair", type=options.whole(1), default=None, help="people per pair in each pool (default: the "
                                                                "database's, else the run's labels.per_pair)")
    pl.add_argument("--door", action=argparse.BooleanOptionalAction, default=None,
                    help="two pools (default: the database's, else the run's labels.door)")
    pl.add_argument("--labels-per-hour", type=options.number(above=0), default=None,
                    help="one person's pace (default: the pace measured in the label database; without one the "
                         "hours are given at several paces)")
    pl.add_argument("--db", default=None)
    e = sub.add_parser("export", help="write the label database's people's labels into the run's label store")
    e.add_argument("run_dir", help="the run folder, e.g. outputs/demo")
    e.add_argument("--db", default=None, help="the database (default: the run's labels.db, else <run>/labels/labels.sqlite)")
    p = sub.add_parser("import", help="merge a labelling-page export (CSV or JSON) into a run's label store")
    p.add_argument("file")
    p.add_argument("--run-dir", required=True, help="the run folder, e.g. outputs/demo (holds labelling/key.csv "
                                                    "and labels/store.jsonl)")
    p.add_argument("--judge", default="human", help="who labelled (stored as the judge name; default: human)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "export":
        return _export(args)
    if args.command == "add":
        return _add(args)
    if args.command == "plan":
        return _plan(args)
    run_dir = Path(args.run_dir)
    key = run_dir / "labelling" / "key.csv"
    if not key.is_file():
        print(f"lookalike labels: {key} not found — run stage 06 for this run first", flush=True)
        return 2
    try:
        store = LabelStore(run_dir / "labels" / "store.jsonl")
        result = import_export(args.file, key, store, args.judge)
    except LabelError as exc:
        print(f"lookalike labels: {exc}", flush=True)
        return 2
    print(f"added {result['added']} labels ({result['already_held']} already held); "
          f"{len(result['unknown'])} unknown pair ids skipped{': ' + ', '.join(result['unknown'][:10]) if result['unknown'] else ''}; "
          f"{result['conflicting_pairs']} pairs with conflicting adjudications (all kept)")
    return 0


def _serve(args) -> int:
    from lookalike.judging.labeldb import LabelDBError
    from lookalike.judging.server import serve

    if args.per_pair is not None and args.per_pair < 1:
        print("lookalike labels serve: --per-pair must be 1 or more", flush=True)
        return 2
    try:
        serve(args.run_dir, host=args.host, port=args.port, db=args.db, per_pair=args.per_pair, door=args.door)
    except LabelDBError as exc:
        print(f"lookalike labels serve: {exc}", flush=True)
        return 2
    return 0


def _export(args) -> int:
    from lookalike.judging import team
    from lookalike.judging.labeldb import LabelDBError, describe, existing
    from lookalike.judging.server import run_params, settings_from

    run_dir = Path(args.run_dir)
    try:
        cfg = run_params(run_dir)
        db = existing(args.db if args.db is not None else cfg.labels.db, run_dir)
        if db is None:
            print(f"lookalike labels export: {run_dir} has no label database (start one with lookalike labels serve)",
                  flush=True)
            return 2
        sent = team.export_to_store(db, LabelStore(run_dir / "labels" / "store.jsonl"))
        labels = db.labels()
        settings, notes = settings_from(cfg, db)
        table = team.agreement_table(labels, db.machine_labels(), seed=int(cfg.seed))
        progress = team.progress(labels, db.pairs(), db.annotators(), settings.per_pair, settings.pools)
    except (LabelDBError, LabelError) as exc:
        print(f"lookalike labels export: {exc}", flush=True)
        return 2
    out = run_dir / "labels"
    table.to_csv(out / "annotator_agreement.csv", index=False, float_format="%.6g")
    progress["per_annotator"].to_csv(out / "progress_per_annotator.csv", index=False, float_format="%.6g")
    progress["per_question"].to_csv(out / "progress_per_question.csv", index=False)
    print(f"{describe(db.target, run_dir)}: {sent['written']} people's labels written to labels/store.jsonl "
          f"({sent['already_held']} already there; {sent['retracted']} taken back, kept in the database only"
          + (f"; {sent['metadata_pool']} from the metadata pool, kept for the judge door only" if sent["metadata_pool"] else "")
          + "); labels/annotator_agreement.csv, labels/progress_per_annotator.csv, labels/progress_per_question.csv written")
    for note in notes:
        print(f"  {note}")
    for row in table.to_dict("records"):
        print(f"  {row['scope']}: {row['first']} vs {row['second']}: {team.agreement_words(row)}")
    return 0


def _add(args) -> int:
    from lookalike.judging.labeldb import LabelDBError, describe
    from lookalike.judging.server import load_run, open_db, require_run, run_params, settings_from

    run_dir = Path(args.run_dir)
    try:
        require_run(run_dir)
        noun = load_run(run_dir).noun
        cfg = run_params(run_dir)
        db = open_db(run_dir, cfg, args.db)
        settings_from(cfg, db)          # a new database takes the run's settings before anyone is in it
        who, token = db.add_person(args.name, args.pool, "adjudicator" if args.adjudicator else "annotator",
                                   lead=args.lead, new_token=args.new_token)
    except LabelDBError as exc:
        print(f"lookalike labels add: {exc}", flush=True)
        return 2
    print(f"{who['name']}: {who['pool']} pool, {who['role']}" + (", lead" if who["lead"] else "")
          + f" — in {describe(db.target, run_dir)}")
    if who["pool"] == "metadata":
        print(f"  they see each {noun}'s file name and caption; their labels are kept for the judge door only")
    print(f"  personal token (shown this once; give it to {who['name']} privately): {token}")
    return 0


def _plan(args) -> int:
    from lookalike.judging import team
    from lookalike.judging.labeldb import LabelDBError, existing
    from lookalike.judging.server import load_run, run_params, settings_from

    run_dir = Path(args.run_dir)
    if args.people < 1 or (args.per_pair is not None and args.per_pair < 1):
        print("lookalike labels plan: --people and --per-pair must be 1 or more", flush=True)
        return 2
    try:
        cfg = run_params(run_dir)
        loaded = load_run(run_dir)
        db = existing(args.db if args.db is not None else cfg.labels.db, run_dir)
        settings, _ = settings_from(cfg, None) if db is None else settings_from(cfg, db)
        labels = db.labels() if db is not None else None
    except LabelDBError as exc:
        print(f"lookalike labels plan: {exc}", flush=True)
        return 2
    per_pair = args.per_pair or settings.per_pair
    door = settings.door if args.door is None else args.door
    plan = team.plan(loaded.pairs, args.people, per_pair, door, float(cfg.labels.door_share),
                     labels, loaded.machine, args.labels_per_hour)
    for line in plan["lines"]:
        print(line)
    return 0 if plan["feasible"] else 1
