"""Late interaction (MaxSim) over multi-vector pages: the exact scorer every other search is checked against.

``maxsim`` scores every (query, page) pair exactly in float32 within a memory budget;
``retrieval.pruning`` finds the same top k while scoring fewer pages. Both share the padded page
blocks and the fixed-order token sum here, so a (query, page) gets the same bits from either.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def padded_block(pages: Sequence[np.ndarray], idx: Sequence[int], dim: int):
    """Pages idx as one (m, longest, d) float32 tensor, each padded by repeating its first vector
    (a repeated vector changes no maximum); an empty page is all zeros and scores 0. A page
    sequence with its own ``block(idx)`` (retrieval.store.StoredPages) builds the block itself."""
    import torch

    if hasattr(pages, "block"):
        return pages.block(idx)

    longest = max(1, max(len(pages[i]) for i in idx))
    block = torch.empty((len(idx), longest, dim), dtype=torch.float32)
    for j, i in enumerate(idx):
        t = torch.as_tensor(np.asarray(pages[i], dtype=np.float32))
        if len(t) == 0:
            block[j] = 0.0
            continue
        block[j, : len(t)] = t
        block[j, len(t):] = t[0]
    return block


class EqualPages(Sequence):
    """Pages that all hold the same number of vectors (at least one), kept as one (n, tokens, dim) float32
    array: a block of them is a slice of it, where padded_block would copy page by page. Single-vector
    pages scored by MaxSim (document context over a dense encoder's pages) are the case: 100,000 of them
    were copied one at a time into every block of every block of questions, the stage's time went there,
    and the many small copies left the allocator holding memory that nothing used."""

    def __init__(self, pages: Sequence[np.ndarray]):
        self.data = np.ascontiguousarray(np.stack([np.asarray(p, dtype=np.float32) for p in pages]))
        if self.data.ndim != 3 or self.data.shape[1] == 0:
            raise ValueError(f"EqualPages: pages of shape (tokens >= 1, dim) expected, got {self.data.shape[1:]}")

    @staticmethod
    def fits(pages: Sequence[np.ndarray]) -> bool:
        """Whether every page has the same (tokens >= 1, dim) shape."""
        shapes = {np.shape(p) for p in pages}
        return len(shapes) == 1 and len(next(iter(shapes))) == 2 and next(iter(shapes))[0] > 0

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]

    def lengths(self) -> np.ndarray:
        """Each page's number of vectors (all the same)."""
        return np.full(len(self.data), self.data.shape[1], dtype=np.int64)

    def block(self, idx: Sequence[int]):
        """Pages idx as the (m, tokens, dim) float32 tensor padded_block gives (no page needs padding)."""
        import torch

        if isinstance(idx, range) and idx.step == 1:
            return torch.from_numpy(self.data[idx.start:idx.stop])
        return torch.from_numpy(self.data[np.asarray(idx, dtype=np.int64)])


def padded_queries(queries: Sequence[np.ndarray], dim: int):
    """Queries as one (nq, longest, d) float32 tensor (at least 1 token wide), padded with zero
    tokens: a zero token adds exactly 0 to a MaxSim sum."""
    import torch

    qlen = max(1, max((len(q) for q in queries), default=1))
    Q = torch.zeros((len(queries), qlen, dim), dtype=torch.float32)
    for i, q in enumerate(queries):
        Q[i, : len(q)] = torch.as_tensor(np.asarray(q, dtype=np.float32))
    return Q


BLOCK_TARGET_MB = 32.0


def token_sum(best):
    """Sum (n, tokens, pages) over tokens one token at a time, left to right.

    torch's own sum picks its order by the tensor's shape, so the same query and page summed in
    blocks of different sizes can differ in the last bit -- enough to split two tied pages. A
    fixed order gives every (query, page) the same float32 score however the work was blocked
    (trailing zero tokens of padding add exactly 0).
    """
    out = best[:, 0].clone()
    for t in range(1, best.shape[1]):
        out += best[:, t]
    return out


def maxsim(queries: Sequence[np.ndarray], pages: Sequence[np.ndarray], memory_budget_mb: float = 512.0,
           device: str = "cpu") -> np.ndarray:
    """Late-interaction scores: score[q, p] = sum over query tokens of the max inner product with page p.

    queries, pages: lists of (tokens, dim) float arrays; lengths may differ. Exact float32.
    How: query tokens are stacked into one matrix (padding rows are zero, so they add 0); pages are
    taken a block at a time, each padded to the block's longest page by repeating one of its own
    vectors (a repeated vector cannot change a maximum, so no mask pass is needed); one GEMM per
    block gives every token-by-token similarity, reduced by a max over the page's vectors and a sum
    over the query's tokens. The similarity block never exceeds memory_budget_mb (queries are split
    too when one page's block would not fit), so memory stays bounded whatever the corpus size.
    Unlike colpali-engine's scorer, padding never enters a maximum (see the tests).
    """
    import torch

    nq, npages = len(queries), len(pages)
    if not nq or not npages:
        return np.zeros((nq, npages), dtype=np.float32)
    dim = int(np.asarray(queries[0]).shape[1])
    dev = torch.device(device)
    Q = padded_queries(queries, dim)
    qlen = Q.shape[1]
    Q = Q.to(dev)
    page_lengths = pages.lengths() if hasattr(pages, "lengths") else np.array([len(p) for p in pages])
    # float32 elements in one similarity block: the budget caps it, and blocks larger than about
    # 32 MiB only get slower here (measured: 512 MiB blocks run at half the speed of 32 MiB ones).
    budget = min(memory_budget_mb, BLOCK_TARGET_MB) * 2**20 / 4
    q_block = int(max(1, min(nq, budget // (qlen * page_lengths.max()))))
    out = torch.empty((nq, npages), dtype=torch.float32)
    with torch.no_grad():
        start = 0
        while start < npages:
            # grow the page block while the padded similarity block fits the budget
            stop, longest = start, 0
            while stop < npages:
                longest_next = max(longest, int(page_lengths[stop]))
                if stop > start and q_block * qlen * (stop + 1 - start) * longest_next > budget:
                    break
                longest, stop = longest_next, stop + 1
            block = padded_block(pages, range(start, stop), dim)
            flat = block.to(dev).reshape(-1, dim).T
            for qs in range(0, nq, q_block):
                qb = Q[qs:qs + q_block]
                sims = qb.reshape(-1, dim) @ flat
                # the block's own width: an empty page alone in a block is padded to one zero vector
                best = sims.view(len(qb), qlen, stop - start, block.shape[1]).amax(dim=3)
                out[qs:qs + len(qb), start:stop] = token_sum(best).float().cpu()
            start = stop
    return out.numpy()
