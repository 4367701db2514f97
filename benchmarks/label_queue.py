"""The team label server's queue at the size of a real pool: median milliseconds to hand a person
their next pair and to commit a label, on a SQLite label database, against a peer in the same run —
the same queue re-hashing every pair on every request (each person's shuffled order not kept).

Both ways must hand out the same pairs in the same order (checked on every request); the last line
is the ratio, peer over ours.

    .venv/bin/python benchmarks/label_queue.py --pairs 50000 --people 3 --requests 60
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from lookalike.judging.labeldb import LabelDB


def _database(folder: Path, pairs: int, people: int) -> LabelDB:
    db = LabelDB(folder / "labels.sqlite")
    db.add_pairs(pd.DataFrame({"pair_id": [f"p{i:07d}" for i in range(pairs)],
                               "query_id": [f"q{i // 100:05d}" for i in range(pairs)],
                               "unit_id": [f"u{i}" for i in range(pairs)], "question_sha": "x",
                               "question": "What was the revenue?", "flagged": ""}))
    for i in range(people):
        db.add_person(f"person{i}", "blind")
    return db


def _session(db: LabelDB, people: int, requests: int, per_pair: int, keep_orders: bool) -> tuple[list, list, list]:
    handed, t_next, t_submit = [], [], []
    for i in range(requests):
        name = f"person{i % people}"
        if not keep_orders:
            db._orders.clear()
        t = time.perf_counter()
        got = db.next_pair(name, per_pair, 600, 0, False)
        t_next.append(time.perf_counter() - t)
        t = time.perf_counter()
        db.submit(name, got.pair_id, "irrelevant", "", f"{'k' if keep_orders else 'p'}-{i:08d}", per_pair, False)
        t_submit.append(time.perf_counter() - t)
        handed.append((name, got.pair_id))
    return handed, t_next, t_submit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=50000)
    ap.add_argument("--people", type=int, default=3)
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--per-pair", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ours = _session(_database(Path(tmp) / "ours", args.pairs, args.people), args.people, args.requests,
                        args.per_pair, keep_orders=True)
        peer = _session(_database(Path(tmp) / "peer", args.pairs, args.people), args.people, args.requests,
                        args.per_pair, keep_orders=False)
    if ours[0] != peer[0]:
        print("the two queues handed out different pairs: the kept order is wrong")
        return 1
    ms = lambda xs: 1000 * statistics.median(xs)  # noqa: E731
    print(f"{args.pairs} pairs, {args.people} people, {args.requests} requests, {args.per_pair} per pair; "
          f"the same {len(ours[0])} pairs handed out in the same order")
    print(f"next pair: {ms(ours[1]):.1f} ms (orders kept), {ms(peer[1]):.1f} ms (re-hashed per request); "
          f"submit: {ms(ours[2]):.1f} ms, {ms(peer[2]):.1f} ms (medians)")
    print(f"next_vs_rehash={ms(peer[1]) / ms(ours[1]):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
