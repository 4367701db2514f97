"""``lookalike leak-check PARAMS.yaml``: the leak ablation's CI gate.

Exit 0: no leak found; 1: a leak; 2: bad parameters; 3: not evaluated (no query pairs could be
built, so nothing was measured — never reported as a leak or as a pass).

It runs stage 03's own ablation (lookalike.stages.leak.ablation: the same indexes, query sets,
pooled blind judging and table) on a seeded sample of leak.gate_units units, in a temporary run
folder, and applies the same gate (lookalike.analysis.leakage.gate).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from lookalike import params as P
from lookalike.analysis import leakage as L
from lookalike.io.cache import Cache
from lookalike.stages import context, leak, stratify


PASS, LEAK, BAD_PARAMS, NOT_EVALUATED = 0, 1, 2, 3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lookalike leak-check", description=__doc__)
    ap.add_argument("params", help="run parameter file (deep-merged over params/base.yaml)")
    ap.add_argument("--inject-caption-leak", action="store_true",
                    help="fault injection: embed caption text in the image path (the gate must then fail)")
    ap.add_argument("--threshold", type=float, default=None, help="override leak.threshold")
    args = ap.parse_args(argv)
    try:
        prm = P.load_params(args.params)
    except P.ParamsError as exc:
        print(f"lookalike leak-check: {exc}")
        return 2
    inject = args.inject_caption_leak or prm["leak"]["inject_caption_leak"]
    threshold = prm["leak"]["threshold"] if args.threshold is None else args.threshold
    gate_units = prm["leak"]["gate_units"]
    with tempfile.TemporaryDirectory() as tmp:
        ctx = context(Path(tmp), prm)
        corpus = stratify.load_corpus(ctx)          # what stage 01 reads: dpi, pages, max_pages, name_pattern ...
        _, _, _, table, _ = leak.ablation(ctx, corpus.units, Cache(prm["encode"]["cache_dir"] or None),
                                          max_units=gate_units, inject_caption_leak=inject, n_boot=1000)
    ok, blind, derived = L.gate(table, threshold)
    n = int(table["n"].iloc[0]) if len(table) else 0
    print(f"leak-check: {min(len(corpus.units), gate_units)} units, {n} query pairs"
          f"{' (caption leak injected)' if inject else ''}")
    print(f"image index recall@10: blind {blind:.3f}, caption-derived {derived:.3f}, "
          f"difference {derived - blind:+.3f} (threshold {threshold:+.3f})")
    print(table[["index", "query_set", "n", "recall_10", "recall_10_lo", "recall_10_hi"]].round(3).to_string(index=False))
    if blind != blind or derived != derived:
        print("NOT EVALUATED: no blind / caption-derived query pairs could be built from this corpus "
              "(they need caption fields, or your own leak.blind_queries file). Exit 3: the gate did not run.")
        return NOT_EVALUATED
    if not ok:
        print("FAIL: the image index scores materially higher on caption-derived queries than on blind ones — "
              "something text-shaped (captions, file names, alt text) reaches the image path.")
        return 1
    print("PASS: the image index does not favour caption-derived queries.")
    return 0
