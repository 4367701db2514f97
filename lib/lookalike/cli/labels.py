"""``lookalike labels import FILE --run-dir outputs/<run>``: merge a labelling-page export into the
run's label store as people's labels."""

from __future__ import annotations

import argparse
from pathlib import Path

from lookalike.judging.store import LabelError, LabelStore, import_export


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lookalike labels", description="The label store.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("import", help="merge a labelling-page export (CSV or JSON) into a run's label store")
    p.add_argument("file")
    p.add_argument("--run-dir", required=True, help="the run folder, e.g. outputs/demo (holds labelling/key.csv "
                                                    "and labels/store.jsonl)")
    p.add_argument("--judge", default="human", help="who labelled (stored as the judge name; default: human)")
    args = parser.parse_args(argv)
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
