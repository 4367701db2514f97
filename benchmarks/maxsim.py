"""Benchmark: lookalike's MaxSim against colpali-engine's score_multi_vector on the same tensors.

    python benchmarks/maxsim.py [--queries 200] [--query-tokens 20] [--pages 2000] [--page-tokens 1030]
                                [--dim 128] [--budget-mb 512]

Random L2-normalised token vectors (as ColPali-family models emit). Both scorers get the same
lists of tensors; each is timed once in this process (after a small warm-up) and its peak memory
is the growth of the resident set during its turn (Linux VmHWM, reset before each). Prints the
max absolute difference of the score matrices and the time ratio. The default is scaled down
from 1,000 queries x 10,000 pages so that both fit in memory side by side on a 24 GiB machine.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from lookalike.retrieval.indexes import maxsim  # noqa: E402


def _kb(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def measured(fn):
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    base = _kb("VmRSS")
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, max(0, _kb("VmHWM") - base) / 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--query-tokens", type=int, default=20)
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--page-tokens", type=int, default=1030)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--budget-mb", type=float, default=512)
    ap.add_argument("--colpali-batch", type=int, default=128)
    args = ap.parse_args(argv)
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

    gen = torch.Generator().manual_seed(0)
    norm = torch.nn.functional.normalize
    qs = [norm(torch.randn(args.query_tokens, args.dim, generator=gen), dim=-1) for _ in range(args.queries)]
    ps = [norm(torch.randn(args.page_tokens, args.dim, generator=gen), dim=-1) for _ in range(args.pages)]
    qs_np, ps_np = [q.numpy() for q in qs], [p.numpy() for p in ps]
    flops = 2 * args.queries * args.query_tokens * args.pages * args.page_tokens * args.dim
    print(f"{args.queries} queries x {args.query_tokens} tokens vs {args.pages} pages x {args.page_tokens} vectors "
          f"x {args.dim} dims ({flops / 1e12:.2f} TFLOP); torch threads: {torch.get_num_threads()}")
    maxsim(qs_np[:2], ps_np[:4], args.budget_mb)
    BaseVisualRetrieverProcessor.score_multi_vector(qs[:2], ps[:4])
    ours, t_ours, m_ours = measured(lambda: maxsim(qs_np, ps_np, args.budget_mb))
    ref, t_ref, m_ref = measured(lambda: BaseVisualRetrieverProcessor.score_multi_vector(
        qs, ps, batch_size=args.colpali_batch).float().numpy())
    diff = float(np.abs(ours - ref).max())
    print(f"{'scorer':<34} {'seconds':>8} {'GFLOP/s':>8} {'peak MiB':>9}")
    print(f"{'lookalike maxsim (budget ' + str(int(args.budget_mb)) + ' MiB)':<34} {t_ours:>8.2f} "
          f"{flops / t_ours / 1e9:>8.0f} {m_ours:>9.0f}")
    print(f"{'colpali-engine score_multi_vector':<34} {t_ref:>8.2f} {flops / t_ref / 1e9:>8.0f} {m_ref:>9.0f}")
    print(f"max abs difference: {diff:.2e}; colpali-engine / lookalike time: {t_ref / t_ours:.2f}x")
    assert diff < 1e-4, f"scores differ by {diff}"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
