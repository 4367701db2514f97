"""Benchmark: exact top-k MaxSim -- lookalike (pruned and plain) against colpali-engine's scorer.

    python benchmarks/maxsim.py [--quick] [--corpus structured|uniform] [--queries 200]
                                [--query-tokens 20] [--pages 2000] [--page-tokens 1030] [--dim 128]
                                [--k 10] [--clusters 64] [--repeat 3]

Every scorer answers the same question: each query's top k pages by MaxSim.

* colpali-engine: ``score_multi_vector`` over all pages, then the top k.
* lookalike exact: ``indexes.maxsim`` over all pages, then the top k (canonical tie rule).
* lookalike pruned: ``pruning.maxsim_topk`` -- per-page cluster balls bound each page's score, and
  only pages whose bound reaches the k-th exact score are scored. Its index (the balls) is built
  once per corpus; the build is timed and shown apart, and a speedup with the build included is
  printed too.

The pruned top k must equal the exact one: same pages in the same order (score descending, ties by
page position descending) and scores within 1e-5; the script fails otherwise. It reports the
exact part's GFLOP/s against this machine's float32 matmul rate measured in the same run, and the
share of (query, page) pairs pruned. Times are medians of --repeat runs.

Corpora (benchmarks/corpora.py): ``structured`` is shaped like ColPali-family page embeddings
(background vectors, a small vocabulary per page, near-duplicate pages, queries built from one
target page); ``uniform`` is vectors uniform on the sphere, where no bound can separate pages.
The default size is scaled down from 1,000 queries x 10,000 pages so that everything fits in
memory side by side on a 24 GiB machine. The last line of --quick reads
``speedup_vs_colpali_engine=... topk_identical=... max_abs_diff=...``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora  # noqa: E402
from lookalike.retrieval.indexes import maxsim  # noqa: E402
from lookalike.retrieval.pruning import maxsim_topk, page_balls  # noqa: E402


def timed(fn, repeat: int):
    """(last result, median seconds) of repeat calls."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def canonical_topk(scores: np.ndarray, k: int) -> np.ndarray:
    """(nq, k) page positions: score descending, ties by position descending."""
    n = scores.shape[1]
    return np.stack([np.lexsort((-np.arange(n), -row))[:k] for row in scores])


def matmul_peak(repeat: int = 5) -> float:
    """The best float32 matmul rate over a few shapes like MaxSim's (k = 128), in GFLOP/s: a lower
    bound on the machine's peak (a share above 100% means the peak was missed, not exceeded)."""
    best = 0.0
    for m, n in [(4000, 2060), (2000, 4120), (4000, 4120), (320, 16480), (2000, 16480), (4000, 32960)]:
        a, b = torch.randn(m, 128), torch.randn(n, 128).T        # pages as MaxSim holds them
        a @ b
        _, t = timed(lambda: a @ b, repeat)
        best = max(best, 2 * m * n * 128 / t / 1e9)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 queries x 1,000 pages, 3 repeats")
    ap.add_argument("--corpus", choices=["structured", "uniform"], default="structured")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--query-tokens", type=int, default=20)
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--page-tokens", type=int, default=1030)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--clusters", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--colpali-batch", type=int, default=128)
    args = ap.parse_args(argv)
    if args.quick:
        args.queries, args.pages = min(args.queries, 100), min(args.pages, 1000)
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

    make = getattr(corpora, args.corpus)
    qs_np, ps_np, _ = make(args.pages, args.queries, page_tokens=args.page_tokens, query_tokens=args.query_tokens,
                           dim=args.dim, seed=0)
    qs, ps = [torch.from_numpy(q) for q in qs_np], [torch.from_numpy(p) for p in ps_np]
    k = min(args.k, args.pages)
    flops_pair = 2 * args.query_tokens * args.page_tokens * args.dim
    print(f"{args.corpus} corpus: {args.queries} queries x {args.query_tokens} tokens vs {args.pages} pages x "
          f"{args.page_tokens} vectors x {args.dim} dims, top {k}; torch threads: {torch.get_num_threads()}; "
          f"medians of {args.repeat} runs")
    peak = matmul_peak()
    maxsim(qs_np[:2], ps_np[:4])
    maxsim_topk(qs_np[:2], ps_np[:8], 2, page_balls(ps_np[:8], args.clusters))     # warm-up
    BaseVisualRetrieverProcessor.score_multi_vector(qs[:2], ps[:4])

    def colpali():
        s = BaseVisualRetrieverProcessor.score_multi_vector(qs, ps, batch_size=args.colpali_batch).float()
        return torch.topk(s, k, dim=1), s

    (ref_top, ref_scores), t_ref = timed(colpali, args.repeat)
    exact, t_exact = timed(lambda: maxsim(qs_np, ps_np), args.repeat)
    exact_top = canonical_topk(exact, k)
    balls, t_build = timed(lambda: page_balls(ps_np, args.clusters), 1)
    result, t_search = timed(lambda: maxsim_topk(qs_np, ps_np, k, balls), args.repeat)
    top, top_scores = result.ranked(k)

    identical = bool(np.array_equal(top, exact_top))
    diff = float(np.abs(top_scores - np.take_along_axis(exact, exact_top, 1)).max()) if identical else float("inf")
    diff_colpali = float(np.abs(exact - ref_scores.numpy()).max())
    exact_flops = result.pairs_scored * flops_pair
    print(f"best float32 matmul rate measured now (a lower bound on the peak): {peak:.0f} GFLOP/s")
    print(f"{'scorer':<40} {'seconds':>8} {'GFLOP/s':>8}")
    print(f"{'colpali-engine score_multi_vector + topk':<40} {t_ref:>8.2f} "
          f"{flops_pair * args.queries * args.pages / t_ref / 1e9:>8.0f}")
    print(f"{'lookalike maxsim (exact, every page)':<40} {t_exact:>8.2f} "
          f"{flops_pair * args.queries * args.pages / t_exact / 1e9:>8.0f}")
    print(f"{'lookalike maxsim_topk (pruned)':<40} {t_search:>8.2f}  (bounds {result.stats['bound_seconds']:.2f} s, "
          f"exact part {result.stats['exact_seconds']:.2f} s at "
          f"{exact_flops / max(result.stats['exact_seconds'], 1e-9) / 1e9:.0f} GFLOP/s = "
          f"{exact_flops / max(result.stats['exact_seconds'], 1e-9) / 1e9 / peak:.0%} of the matmul rate)")
    print(f"{'  its index: page balls, built once':<40} {t_build:>8.2f}  ({args.clusters} clusters per page)")
    print(f"pairs scored exactly: {result.pairs_scored:,} of {result.pairs_total:,} "
          f"({result.share_pruned:.1%} pruned; query blocks scored in full: "
          f"{result.stats['query_blocks_scored_in_full']})")
    print(f"top {k} identical to exact float32 MaxSim: {identical}; max |score difference| {diff:.2e}; "
          f"exact vs colpali-engine scores: {diff_colpali:.2e}")
    print(f"colpali-engine / pruned: {t_ref / t_search:.2f}x (search); {t_ref / (t_search + t_build):.2f}x "
          f"with the index build counted; colpali-engine / lookalike exact: {t_ref / t_exact:.2f}x")
    print(f"speedup_vs_colpali_engine={t_ref / t_search:.2f} topk_identical={identical} max_abs_diff={diff:.2e}")
    if not identical or diff > 1e-5 or diff_colpali > 1e-4:
        print("FAILED: the pruned top k differs from exact MaxSim", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
