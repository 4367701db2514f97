"""``lookalike labels``: the run's labels.

- ``import FILE --run-dir outputs/<run>``: merge a labelling-page export into the label store;
- ``serve RUN_DIR``: the team label server (blind queues, two pools for the judge door, agreement,
  adjudication, progress) over the run's label database;
- ``export RUN_DIR``: the database's people's labels into the store's JSON Lines, with the agreement
  and progress tables beside it (stage 06 does the same export when it runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lookalike.judging.store import LabelError, LabelStore, import_export


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lookalike labels", description="The label store and the team label server.")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the team label server for a run (after stage 06)")
    s.add_argument("run_dir", help="the run folder, e.g. outputs/demo")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only; "
                                                       "0.0.0.0 lets the team reach it — set LOOKALIKE_LABELS_TOKEN then)")
    s.add_argument("--port", type=int, default=8750)
    s.add_argument("--db", default=None, help="the database: a file (default <run>/labels/labels.sqlite, or the run's "
                                              "labels.db) or postgresql://user:password@host/name")
    s.add_argument("--per-pair", type=int, default=None, help="people per pair (default: the run's labels.per_pair)")
    s.add_argument("--door", action=argparse.BooleanOptionalAction, default=None,
                   help="two pools: a share of people see file name and caption (default: the run's labels.door)")
    s.add_argument("--door-share", type=float, default=None, help="that share (default: the run's labels.door_share)")
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
    if args.door_share is not None and not 0 < args.door_share <= 1:
        print("lookalike labels serve: --door-share must be in (0, 1]", flush=True)
        return 2
    try:
        serve(args.run_dir, host=args.host, port=args.port, db=args.db, per_pair=args.per_pair, door=args.door,
              door_share=args.door_share)
    except LabelDBError as exc:
        print(f"lookalike labels serve: {exc}", flush=True)
        return 2
    return 0


def _export(args) -> int:
    from lookalike.judging import team
    from lookalike.judging.labeldb import LabelDBError, describe, existing
    from lookalike.judging.server import run_params

    run_dir = Path(args.run_dir)
    try:
        params = run_params(run_dir)
        db = existing(args.db if args.db is not None else params["labels"]["db"], run_dir)
        if db is None:
            print(f"lookalike labels export: {run_dir} has no label database (start one with lookalike labels serve)",
                  flush=True)
            return 2
        sent = team.export_to_store(db, LabelStore(run_dir / "labels" / "store.jsonl"))
        labels = db.labels()
        labels_per_pair = int(params["labels"]["per_pair"])
        pools = 2 if params["labels"]["door"] else 1
        table = team.agreement_table(labels, db.machine_labels(), seed=int(params["seed"]))
        progress = team.progress(labels, db.pairs(), db.annotators(), labels_per_pair, pools)
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
    for row in table.to_dict("records"):
        print(f"  {row['scope']}: {row['first']} vs {row['second']}: {team.agreement_words(row)}")
    return 0
