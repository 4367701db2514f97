"""Benchmark: hard negatives for 400,000 synthetic units (goal: at most 60 s on this machine).

    python benchmarks/negatives.py [--units 400000] [--dim 128] [--golds all|N]

Synthetic metadata: 8 templates x 500 entities x 10 metrics x 10 periods, 1% restated (revision
2); random unit-norm appearance vectors. Every unit is a gold; k = 3 per axis. Prints the wall
time, units per second and pool sizes per axis.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from lookalike.analysis import negatives


def synthetic(n: int, dim: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    t, e, m, p = 8, 500, 10, 10
    grid = np.arange(n - n // 100)
    units = pd.DataFrame({
        "unit_id": [f"u{i:07d}" for i in grid],
        "template_id": [f"t{x}" for x in grid % t],
        "entity": [f"e{x}" for x in (grid // t) % e],
        "metric": [f"m{x}" for x in (grid // (t * e)) % m],
        "period": [f"p{x}" for x in (grid // (t * e * m)) % p],
        "revision": 1,
    })
    restated = units.sample(n=n // 100, random_state=seed).assign(revision=2)
    restated["unit_id"] = restated["unit_id"] + "r"
    units = pd.concat([units, restated], ignore_index=True)
    vectors = rng.standard_normal((len(units), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return units, vectors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--units", type=int, default=400_000)
    ap.add_argument("--dim", type=int, default=128)
    args = ap.parse_args(argv)
    units, vectors = synthetic(args.units, args.dim)
    t0 = time.perf_counter()
    distractors, sizes = negatives.hard_negatives(units, vectors, units["unit_id"], k=3)
    elapsed = time.perf_counter() - t0
    print(f"{len(units):,} units (every one a gold), dim {args.dim}: {elapsed:.1f} s "
          f"({len(units) / elapsed:,.0f} golds/s); {len(distractors):,} distractors; goal <= 60 s")
    print(negatives.pool_summary(sizes).round(2).to_string(index=False))
    assert (distractors["gold_unit_id"] != distractors["unit_id"]).all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
