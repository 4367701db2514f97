"""Exact top-k MaxSim that scores fewer pages: a per-page bound skips pages that cannot reach the top k.

MaxSim is score(q, p) = sum over query tokens t of max over page vectors v of t . v. Its exact
form already runs close to this CPU's matmul peak (benchmarks/maxsim.py), so the only way to go
faster without changing a single result is to do less of it. How:

1. Each page's vectors are split into a few clusters (greedy farthest-point, so every cluster is
   tight), and each cluster is kept as a ball: centre c and radius r = the largest distance of a
   member from c. For any member v, t . v = t . c + t . (v - c) <= t . c + |t| r. So
   ``bound(q, p) = sum_t max_clusters (t . c + |t| r)`` is an upper bound on score(q, p). It costs one
   matmul with the query tokens augmented by their norms and the centres by their radii, over
   ``clusters`` columns per page instead of ~1,000 -- a few per cent of the exact work.
2. Each query's pages with the highest bounds are scored exactly first; the k-th best exact score
   tau is then a floor the final k-th score cannot fall below. (A few queries go first as a
   probe: when their bounds leave more than half of the pages above the floor, every page of the
   query block is scored in plain blocks instead, which is then cheaper.)
3. Every page whose bound reaches tau - tol is scored exactly; no other page can reach the top k,
   since its exact score is at most its bound. tol (default 1e-4 per query token) covers float32
   rounding in the two matmuls, so the skip is safe in the arithmetic actually used.

The exact scores are those of ``late_interaction.maxsim`` (the same padded-block matmul, max, sum), so the
returned top k -- scores and ranking, ties included -- equal exact float32 MaxSim over all pages.
Pages are scored in blocks of look-alike pages (grouped by their mean direction), so the queries
that need a block are few and the block's vectors are copied once for all of them.

The saving depends on the corpus. It is large when a page's vectors cluster tightly (much of a
page is background; its words repeat over patches) and a query's best pages stand out -- what
benchmarks/corpora.py's structured corpus models; real ColPali output could not be measured here
(no weights). On vectors drawn uniformly at random no bound separates anything and every page is
scored (the benchmark prints both cases); the result is exact either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Sequence

import numpy as np

from lookalike.retrieval.late_interaction import maxsim, padded_block, padded_queries, token_sum

DEFAULT_CLUSTERS = 64
BLOCK_PAGES = 16
FULL_SCORE_SHARE = 0.5     # above this share of pages left to score, score them all in plain blocks
PROBE_QUERIES = 8          # queries whose best pages are scored first, to see whether the bounds separate


@dataclass
class PageBalls:
    """Per-page cluster balls: centres (P, K, d) float32 and radii (P, K); unused clusters have
    radius -inf so they never raise a maximum. order lists look-alike pages next to each other,
    for blocked scoring."""

    centres: object                 # torch.Tensor (P, K, d)
    radii: object                   # torch.Tensor (P, K)
    order: np.ndarray                 # page indices, look-alike pages next to each other
    clusters: int
    seconds: float = 0.0
    _augmented: object = None

    def augmented(self):
        """[centre, radius] rows (P * K, d + 1); unused clusters are a zero centre and a radius
        of UNUSED_RADIUS, so they need no mask."""
        import torch

        if self._augmented is None:
            live = torch.isfinite(self.radii)
            r = torch.where(live, self.radii, torch.tensor(UNUSED_RADIUS))
            c = torch.where(live[:, :, None], self.centres, torch.zeros(()))
            self._augmented = torch.cat([c, r[:, :, None]], dim=2).reshape(-1, c.shape[2] + 1).contiguous()
        return self._augmented


@dataclass
class TopK:
    """Exact top-k candidates: per query, every page whose exact score reaches the k-th best.

    idx (nq, m) page positions, -1 where a query has fewer; scores (nq, m) their exact MaxSim.
    pairs_scored / pairs_total: how many (query, page) pairs were scored exactly."""

    idx: np.ndarray
    scores: np.ndarray
    pairs_scored: int
    pairs_total: int
    stats: dict = field(default_factory=dict)

    @property
    def share_pruned(self) -> float:
        """The share of (query, page) pairs the bounds let go unscored."""
        return 1.0 - self.pairs_scored / self.pairs_total if self.pairs_total else 0.0

    def ranked(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(nq, k) page positions and scores in the canonical order: score descending, ties by
        position descending (what a run cut by unit id gives when ids sort as positions)."""
        idx, sc = [], []
        for ids, scores in zip(self.idx, self.scores):
            keep = ids >= 0
            order = np.lexsort((-ids[keep], -scores[keep]))[:k]
            idx.append(ids[keep][order])
            sc.append(scores[keep][order])
        return np.stack(idx), np.stack(sc)


def page_balls(pages: Sequence[np.ndarray], clusters: int = DEFAULT_CLUSTERS, projection_dims: int = 16,
               block_pages: int = 64) -> PageBalls:
    """Cluster each page's vectors into at most `clusters` balls: farthest-point seeds (found in a
    `projection_dims`-dimensional projection), nearest-seed assignment, centre = member mean,
    radius = farthest member. Deterministic: the projection comes from a fixed seed, seeding
    starts at each page's first vector, ties go to the lowest index."""
    import time

    import torch

    t0 = time.perf_counter()
    n = len(pages)
    dim = int(np.asarray(pages[0]).shape[1]) if n else 0
    K = int(clusters)
    centres = torch.zeros((n, K, dim), dtype=torch.float32)
    radii = torch.full((n, K), float("-inf"), dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    projection = torch.randn((dim, min(dim, projection_dims)), generator=gen)
    with torch.no_grad():
        for s in range(0, n, block_pages):
            idx = list(range(s, min(n, s + block_pages)))
            X = padded_block(pages, idx, dim)                          # (B, L, d)
            B, L, _ = X.shape
            lengths = torch.tensor([len(pages[i]) for i in idx])
            k = min(K, L)
            sq = (X * X).sum(-1)                                  # (B, L)
            # seeds: farthest-point (each seed is the vector farthest from all seeds so far, so no
            # vector is left far from a centre -- the radius is what the bound pays for), found in
            # a fixed random projection to a few dimensions to keep the passes cheap; then every
            # vector goes to its nearest seed and the centre moves to the members' mean. The radius
            # is measured after, in full dimension, so the bound is valid whatever the seeds.
            Xp = X @ projection                                   # (B, L, p)
            sqp = (Xp * Xp).sum(-1)
            seeds = torch.zeros((B, k), dtype=torch.long)
            nearest = torch.full((B, L), float("inf"))
            rows = torch.arange(B)
            for j in range(1, k + 1):
                c = Xp[rows, seeds[:, j - 1]]                     # (B, p)
                d2 = sqp - 2 * torch.bmm(Xp, c[:, :, None])[:, :, 0] + (c * c).sum(-1, keepdim=True)
                nearest = torch.minimum(nearest, d2)
                if j < k:
                    seeds[:, j] = torch.argmax(nearest, dim=1)
            C = X[rows[:, None], seeds]                           # (B, k, d)
            d2 = sq[:, :, None] - 2 * torch.bmm(X, C.transpose(1, 2)) + (C * C).sum(-1)[:, None, :]
            assign = torch.argmin(d2, dim=2)                      # (B, L)
            onehot = torch.nn.functional.one_hot(assign, k).to(torch.float32)
            count = onehot.sum(1)                                 # (B, k)
            mean = torch.bmm(onehot.transpose(1, 2), X) / count.clamp_min(1)[:, :, None]
            mean = torch.where(count[:, :, None] > 0, mean, C)
            dist = (X - mean.gather(1, assign[:, :, None].expand(-1, -1, dim))).norm(dim=-1)   # (B, L)
            r = torch.full((B, k), float("-inf")).scatter_reduce(1, assign, dist, reduce="amax")
            empty = lengths == 0
            r[empty] = float("-inf")
            r[empty, 0] = 0.0                                     # an empty page scores 0: bound 0
            mean[empty] = 0.0
            centres[s:s + B, :k] = mean
            radii[s:s + B, :k] = torch.where(count > 0, r, torch.tensor(float("-inf")))
        # look-alike pages next to each other: sort by the nearest of a few page-level directions
        order = _page_order(centres, radii)
    return PageBalls(centres=centres, radii=radii, order=order, clusters=K, seconds=time.perf_counter() - t0)


def _page_order(centres, radii, iterations: int = 8) -> np.ndarray:
    import torch

    n = len(centres)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    live = torch.isfinite(radii).to(torch.float32)
    summary = (centres * live[:, :, None]).sum(1)
    summary = torch.nn.functional.normalize(summary, dim=-1)
    g = max(1, min(n // BLOCK_PAGES, 2048))
    heads = summary[torch.linspace(0, n - 1, g).round().long()]
    def nearest(heads):
        return torch.cat([torch.argmax(summary[s:s + 4096] @ heads.T, dim=1) for s in range(0, n, 4096)])

    for _ in range(iterations):
        assign = nearest(heads)
        new = torch.zeros_like(heads).index_add_(0, assign, summary)
        heads = torch.where(new.norm(dim=-1, keepdim=True) > 0, torch.nn.functional.normalize(new, dim=-1), heads)
    assign = nearest(heads).numpy()
    return np.lexsort((np.arange(n), assign)).astype(np.int64)


UNUSED_RADIUS = -1e30      # an unused cluster: its bound t . 0 + |t| r is far below any real one


def bounds(Q, qnorm, balls: PageBalls, budget_mb: float = 32.0):
    """Upper bounds (nq, P) on MaxSim for padded queries Q (nq, qlen, d) with token norms qnorm.

    One matmul of [t, |t|] against [c, r] per page chunk; a padding token (t = 0) bounds 0."""
    import torch

    nq, qlen, dim = Q.shape
    n, K = balls.radii.shape
    out = torch.empty((nq, n), dtype=torch.float32)
    Qa = torch.cat([Q, qnorm[:, :, None]], dim=2).reshape(nq * qlen, dim + 1)
    Ca = balls.augmented()
    chunk = int(max(1, (budget_mb * 2**20 / 4) // (nq * qlen * K)))
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        b = (Qa @ Ca[s * K:e * K].T).view(nq, qlen, e - s, K).amax(dim=3)
        out[:, s:e] = b.sum(dim=1)
    return out


def maxsim_topk(queries: Sequence[np.ndarray], pages: Sequence[np.ndarray], k: int, balls: PageBalls | None = None,
                first: int | None = None, tol_per_token: float = 1e-4, budget_mb: float = 32.0,
                query_block: int = 256) -> TopK:
    """Every page whose exact MaxSim reaches each query's k-th best, and its exact score.

    The set always contains the exact top k (and every page tied with the k-th), whatever the data.
    first: how many pages per query, by bound, are scored before the floor is set (default 2k).
    """
    import time

    import torch

    
    nq, n = len(queries), len(pages)
    if not nq or not n:
        return TopK(np.zeros((nq, 0), np.int64), np.zeros((nq, 0), np.float32), 0, nq * n)
    if k >= n:
        s = maxsim(queries, pages)
        return TopK(np.tile(np.arange(n), (nq, 1)), s, nq * n, nq * n,
                    {"exact_seconds": 0.0, "bound_seconds": 0.0, "query_blocks_scored_in_full": nq > 0})
    if balls is None:
        balls = page_balls(pages)
    dim = int(np.asarray(queries[0]).shape[1])
    first = min(n, max(k, first if first is not None else 2 * k))
    t_bound = t_exact = 0.0
    scored = fallbacks = 0
    idx_parts, score_parts = [], []
    order = torch.as_tensor(balls.order)
    blocks = [order[s:s + BLOCK_PAGES] for s in range(0, n, BLOCK_PAGES)]
    with torch.no_grad():
        for qs in range(0, nq, query_block):
            qset = queries[qs:qs + query_block]
            b = len(qset)
            Q = padded_queries(qset, dim)
            qlen = Q.shape[1]
            qnorm = Q.norm(dim=-1)
            tol = tol_per_token * qlen                       # padded_queries: at least 1 token
            t0 = time.perf_counter()
            U = bounds(Q, qnorm, balls)
            t_bound += time.perf_counter() - t0
            t0 = time.perf_counter()
            S = torch.full((b, n), float("-inf"))
            done = torch.zeros((b, n), dtype=torch.bool)

            def score(need) -> None:
                """Exact scores for at least the needed (query, page) pairs, a block of look-alike
                pages at a time, for the queries that need any page of it."""
                for blk in blocks:
                    rows = torch.nonzero((need[:, blk] & ~done[:, blk]).any(dim=1)).flatten()
                    if not len(rows):
                        continue
                    block = padded_block(pages, blk.tolist(), dim)        # copied per use: memory stays bounded
                    m, longest, _ = block.shape
                    flat = block.reshape(-1, dim).T
                    step = int(max(1, (budget_mb * 2**20 / 4) // (Q.shape[1] * m * longest)))
                    for r0 in range(0, len(rows), step):
                        rr = rows[r0:r0 + step]
                        # at least two query rows per matmul (a one-row product takes another kernel)
                        qb = Q[rr] if len(rr) * Q.shape[1] > 1 else torch.cat([Q[rr], torch.zeros_like(Q[rr])], 1)
                        sims = qb.reshape(-1, dim) @ flat
                        best = token_sum(sims.view(len(rr), qb.shape[1], m, longest).amax(dim=3))
                        S[rr[:, None], blk[None, :]] = best
                        done[rr[:, None], blk[None, :]] = True

            def floor(rows):
                """Each query's k-th best exact score so far: the final k-th cannot be lower."""
                return torch.topk(S[rows], k, dim=1).values[:, -1]

            # a probe: a few queries' best pages by bound, scored, say how much the bounds separate
            top_first = torch.topk(U, first, dim=1).indices
            probe = torch.arange(min(b, PROBE_QUERIES))
            need = torch.zeros((b, n), dtype=torch.bool)
            need[probe[:, None], top_first[probe]] = True
            score(need)
            share = (U[probe] >= (floor(probe) - tol)[:, None]).float().mean()
            if share > FULL_SCORE_SHARE:
                # the bounds separate too little here: scoring every page in plain blocks is cheaper
                # than picking them out
                S = torch.as_tensor(maxsim(qset, pages, budget_mb))
                done[:] = True
                fallbacks += 1
            else:
                need = torch.zeros((b, n), dtype=torch.bool)
                need.scatter_(1, top_first, True)
                score(need)
                need = U >= (floor(torch.arange(b)) - tol)[:, None]
                score(need)
            scored += int(done.sum())                   # distinct (query, page) pairs scored exactly
            kth = torch.topk(S, k, dim=1).values[:, -1]
            keep = S >= kth[:, None]
            counts = keep.sum(dim=1)
            width = int(counts.max())
            idx = torch.full((b, width), -1, dtype=torch.long)
            sc = torch.full((b, width), float("-inf"))
            for i in range(b):
                cols = torch.nonzero(keep[i]).flatten()
                idx[i, : len(cols)] = cols
                sc[i, : len(cols)] = S[i, cols]
            idx_parts.append(idx.numpy())
            score_parts.append(sc.numpy())
            t_exact += time.perf_counter() - t0
    width = max(p.shape[1] for p in idx_parts)
    idx = np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1])), constant_values=-1) for p in idx_parts])
    sc = np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1])), constant_values=-np.inf) for p in score_parts])
    return TopK(idx, sc.astype(np.float32), scored, nq * n,
                {"bound_seconds": t_bound, "exact_seconds": t_exact, "build_seconds": balls.seconds,
                 "query_blocks_scored_in_full": fallbacks})
