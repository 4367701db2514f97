"""Multi-vector search at scale: the float16 on-disk page store, exact MaxSim over it within a memory
budget, and candidate search (centroid MaxSim in int8, then exact MaxSim on the candidates) with its
measured candidate recall against exact.

    python benchmarks/scale.py --quick          # 10,000 pages x 1,030 x 128 (2.6 GB on disk), 100 queries
    python benchmarks/scale.py --pages 100000   # 26 GB on disk: checks the free space first

The corpus is ``corpora.StructuredStream`` (a model of ColPali page embeddings, generated page by
page, never held in memory). The search runs in a child process, so its peak RSS is the search's
own: the centroid build, the exact search and the candidate search. Last line:
``recall_at_100=… speedup=… peak_rss_gib=…`` (speedup: candidate search's queries per second over
the exact search's, the centroid build not counted; the build is printed beside it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from corpora import StructuredStream  # noqa: E402
from lookalike.retrieval import store  # noqa: E402


def search(folder: Path, clusters: int, n_candidates: int, budget_mb: float) -> dict:
    """The child process: build centroids, search exactly and by candidates, measure."""
    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    pages = store.PageStore(folder / "pages")
    with np.load(folder / "queries.npz") as z:
        queries = [z[f"q{i}"] for i in range(int(z["n"]))]
    t0 = time.perf_counter()
    cent = store.CentroidIndex.build(pages, folder / "centroids", clusters=clusters)
    cent.first_stage()                             # loaded, padded and quantized once: part of the build
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    exact = store.exact_scores(queries, pages, budget_mb)
    exact_top = store.topk(exact, 100)
    exact_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx, scores, cand = store.candidate_search(queries, pages, cent, 100, n_candidates, budget_mb)
    cand_s = time.perf_counter() - t0
    recall = store.candidate_recall(exact_top, cand)
    # the candidate run's top 10 against exact: same pages, same scores (stage 2 is exact MaxSim)
    top10_same = float(np.mean([set(idx[i, :10]) == set(exact_top[i, :10]) for i in range(len(queries))]))
    max_diff = float(max(np.abs(scores[i] - exact[i, idx[i]]).max() for i in range(len(queries))))
    return {"pages": len(pages), "queries": len(queries), "store_gb": pages.nbytes / 1e9,
            "centroid_gb": cent.store.nbytes / 1e9, "build_s": build_s, "exact_s": exact_s, "cand_s": cand_s,
            "recall_10": recall[10], "recall_100": recall[100], "top10_identical_share": top10_same,
            "max_abs_diff": max_diff, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def report_index(folder: Path, mode: str, clusters: int, n_candidates: int, budget_mb: float) -> dict:
    """A child process: the report's own path (stage 02's MultiVectorIndex) over the store, exact and
    by candidates. mode "stored": the index reads the PageStore a block at a time (what stage 02 does
    now); "memory": every page read into a float32 list first (what stage 02 did before)."""
    from lookalike.retrieval import indexes as retrieve
    from lookalike.retrieval.encoders.base import Vectors

    pages = store.PageStore(folder / "pages")
    with np.load(folder / "queries.npz") as z:
        queries = [z[f"q{i}"] for i in range(int(z["n"]))]
    qv = Vectors("bench", "query-text", [f"q{i}" for i in range(len(queries))], queries, "multi")
    data = pages.pages() if mode == "stored" else [pages.read(i) for i in range(len(pages))]
    units = Vectors("bench", "pixels", list(pages.ids), data, "multi")
    out = {"mode": mode}
    for search in ("exact", "candidates"):
        t0 = time.perf_counter()
        index = retrieve.MultiVectorIndex(search=search, n_candidates=n_candidates, clusters=clusters,
                                          memory_budget_mb=budget_mb).add(units)
        run = index.search(qv, k=100)
        out[f"{search}_s"] = time.perf_counter() - t0
        out[f"{search}_rows"] = len(run)
        out[f"{search}_sha"] = hashlib.sha256(run.to_csv(index=False).encode()).hexdigest()
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10,000 pages, 100 queries")
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--tokens", type=int, default=1030)
    ap.add_argument("--clusters", type=int, default=64)
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--budget-mb", type=float, default=512.0)
    ap.add_argument("--dir", default="", help="where the store goes (default: a temporary folder, removed after); "
                                              "a store already there for the same sizes is reused")
    ap.add_argument("--report-index", nargs="?", const="both", default="", choices=["both", "stored"],
                    help="also time stage 02's MultiVectorIndex over the store (stored) and, with both, over the "
                         "pages read into memory first (the report's path before the store: float32, 4 bytes per "
                         "component in RAM), with each one's peak RSS")
    ap.add_argument("--search", default="", help=argparse.SUPPRESS)
    ap.add_argument("--index-mode", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.search and args.index_mode:
        print(json.dumps(report_index(Path(args.search), args.index_mode, args.clusters, args.candidates,
                                      args.budget_mb)))
        return 0
    if args.search:
        print(json.dumps(search(Path(args.search), args.clusters, args.candidates, args.budget_mb)))
        return 0
    n = 10_000 if args.quick else args.pages
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="lookalike-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    need = n * args.tokens * 128 * 2 * (1 + args.clusters / args.tokens) * 1.02
    free = shutil.disk_usage(root).free
    print(f"store: {n:,} pages x {args.tokens} x 128 float16 = {n * args.tokens * 128 * 2 / 1e9:.1f} GB "
          f"(+ centroids); free at {root}: {free / 1e9:.1f} GB")
    if need > free:
        fits = int(free / (args.tokens * 128 * 2 * 1.05))
        print(f"does not fit: at most about {fits:,} pages fit here; rerun with --pages {fits // 1000 * 1000}")
        return 2
    tag = f"structured-stream:{n}:{args.queries}:{args.tokens}"
    try:
        t0 = time.perf_counter()
        if (root / "pages" / store.META).is_file() and store.PageStore(root / "pages").encoder_id == tag:
            print("reusing the store already in", root)
        else:
            corpus = StructuredStream(n, args.queries, page_tokens=args.tokens, seed=0)
            store.PageStore.write(root / "pages", [f"p{i}" for i in range(n)], corpus.pages(), 128, tag)
            qs = corpus.queries()
            np.savez(root / "queries.npz", n=len(qs), **{f"q{i}": q for i, q in enumerate(qs)})
            print(f"generated and written in {time.perf_counter() - t0:.1f} s")
        out = subprocess.run([sys.executable, __file__, "--search", str(root), "--clusters", str(args.clusters),
                              "--candidates", str(args.candidates), "--budget-mb", str(args.budget_mb)],
                             check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        modes = {}
        for mode in {"both": ("stored", "memory"), "stored": ("stored",), "": ()}[args.report_index]:
            child = subprocess.run([sys.executable, __file__, "--search", str(root), "--index-mode", mode,
                                    "--clusters", str(args.clusters), "--candidates", str(args.candidates),
                                    "--budget-mb", str(args.budget_mb)], check=True, capture_output=True, text=True)
            modes[mode] = json.loads(child.stdout.strip().splitlines()[-1])
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    exact_qps, cand_qps = r["queries"] / r["exact_s"], r["queries"] / r["cand_s"]
    print(f"pages {r['pages']:,}; queries {r['queries']}; store {r['store_gb']:.2f} GB fp16; centroids "
          f"({args.clusters}/page) {r['centroid_gb']:.2f} GB, built in {r['build_s']:.1f} s")
    print(f"exact MaxSim over every page: {r['exact_s']:.1f} s ({exact_qps:.2f} queries/s)")
    print(f"candidates ({args.candidates} by int8 centroid MaxSim, then exact): {r['cand_s']:.1f} s ({cand_qps:.2f} queries/s); "
          f"with the build: {r['queries'] / (r['cand_s'] + r['build_s']):.2f} queries/s")
    print(f"candidate recall vs exact: @10 {r['recall_10']:.4f}, @100 {r['recall_100']:.4f}; top 10 identical for "
          f"{r['top10_identical_share']:.0%} of queries; max |score - exact| {r['max_abs_diff']:.2e}")
    print(f"peak RSS of the search process: {r['peak_rss_gib']:.2f} GiB (memory budget {args.budget_mb:.0f} MB)")
    for mode, m in modes.items():
        print(f"stage 02's index, pages {'in the store, read a block at a time' if mode == 'stored' else 'read into memory first (before)'}: "
              f"exact {m['exact_s']:.1f} s, candidates {m['candidates_s']:.1f} s (centroids built inside); "
              f"peak RSS {m['peak_rss_gib']:.2f} GiB")
    if len(modes) == 2:
        same = all(modes["stored"][f"{x}_sha"] == modes["memory"][f"{x}_sha"] for x in ("exact", "candidates"))
        print(f"stored and in-memory index give the same runs, byte for byte (exact and candidates): {same}")
    print(f"recall_at_100={r['recall_100']:.4f} speedup={exact_qps and cand_qps / exact_qps:.2f} "
          f"peak_rss_gib={r['peak_rss_gib']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
