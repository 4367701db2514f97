"""Multi-vector pages on disk, read lazily, and candidate search over them with a measured recall.

``PageStore`` holds a corpus's page vectors in float16 — one file of every page's vectors end to
end, an offsets table, the ids — written page by page (a corpus never has to fit in memory) and
read a page at a time with plain file reads (no memory map, so what is read does not stay resident
in this process). ``store.pages()`` is a sequence of float32 pages that exact MaxSim
(``late_interaction.maxsim``) consumes block by block, so peak memory follows
``retrieve.memory_budget_mb``, not corpus size.

Candidate search (``retrieve.search: candidates``) is two stages:

1. every page is summarised by ``clusters`` centroids (``pruning.page_balls``: farthest-point
   seeds, member means), stored the same way; a question's approximate score for a page is MaxSim
   against those centroids — about clusters / tokens of the exact work;
2. each question's best ``n_candidates`` pages by that score are scored exactly (MaxSim on the
   stored vectors), and the run is their exact order.

Stage 2 is exact; stage 1 can miss a page. ``candidate_recall`` measures how often, against exact
MaxSim over every stored page, on a sample of questions: the share of the exact top 10 / top 100
found among the candidates. An approximate search is never reported without it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

VECTORS, OFFSETS, IDS, META = "vectors.f16", "offsets.npy", "ids.json", "meta.json"


class StoredPages(Sequence):
    """A PageStore's pages as a sequence of float32 (tokens, dim) arrays, each read when asked for."""

    def __init__(self, store: "PageStore", index: Sequence[int] | None = None):
        self.store = store
        self.index = np.arange(len(store)) if index is None else np.asarray(index, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return StoredPages(self.store, self.index[i])
        return self.store.read(int(self.index[i]))

    def lengths(self) -> np.ndarray:
        o = self.store.offsets
        return (o[self.index + 1] - o[self.index]).astype(np.int64)

    def block(self, idx: Sequence[int]):
        """Pages idx (positions in this sequence) as one padded (m, longest, d) float32 tensor, the
        same as late_interaction.padded_block gives: read as float16 straight into the block,
        padded by repeating each page's first vector, converted once."""
        return self.store.block([int(self.index[i]) for i in idx])


class PageStore:
    """float16 page vectors in a folder: vectors.f16 (rows end to end), offsets.npy, ids.json, meta.json."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)
        meta = json.loads((self.folder / META).read_text())
        self.dim, self.encoder_id = int(meta["dim"]), meta.get("encoder_id", "")
        self.offsets = np.load(self.folder / OFFSETS)
        self.ids = json.loads((self.folder / IDS).read_text())
        self._fh = None

    @classmethod
    def write(cls, folder: Path | str, ids: Sequence[str], pages: Iterable[np.ndarray], dim: int,
              encoder_id: str = "") -> "PageStore":
        """Write pages (an iterable: a generator keeps memory flat) as float16, in ids order."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        offsets = [0]
        with open(folder / VECTORS, "wb") as fh:
            for page in pages:
                page = np.asarray(page)
                if page.ndim != 2 or page.shape[1] != dim:
                    raise ValueError(f"{folder}: page {len(offsets) - 1} has shape {page.shape}, expected (tokens, {dim})")
                fh.write(np.ascontiguousarray(page, dtype=np.float16).tobytes())
                offsets.append(offsets[-1] + len(page))
        if len(offsets) - 1 != len(ids):
            raise ValueError(f"{folder}: {len(offsets) - 1} pages written for {len(ids)} ids")
        np.save(folder / OFFSETS, np.asarray(offsets, dtype=np.int64))
        (folder / IDS).write_text(json.dumps(list(ids)))
        (folder / META).write_text(json.dumps({"dim": dim, "dtype": "float16", "encoder_id": encoder_id}))
        return cls(folder)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        return int(self.offsets[-1]) * self.dim * 2

    def read(self, i: int) -> np.ndarray:
        """Page i as float32 (tokens, dim), read from disk."""
        if self._fh is None:
            self._fh = open(self.folder / VECTORS, "rb")
        import torch

        start, stop = int(self.offsets[i]), int(self.offsets[i + 1])
        buf = bytearray((stop - start) * self.dim * 2)
        if buf and os.preadv(self._fh.fileno(), [buf], start * self.dim * 2) != len(buf):
            raise OSError(f"{self.folder / VECTORS}: page {i} is cut short (the store is truncated)")
        if not buf:
            return np.zeros((0, self.dim), np.float32)
        # torch converts float16 with the CPU's vector instructions (numpy's astype: about 17x slower here)
        return torch.frombuffer(buf, dtype=torch.float16).float().numpy().reshape(stop - start, self.dim)

    def block(self, pages: Sequence[int]):
        """Stored pages as one padded float32 tensor (m, longest, d) (see StoredPages.block)."""
        import torch

        if self._fh is None:
            self._fh = open(self.folder / VECTORS, "rb")
        lengths = [int(self.offsets[i + 1] - self.offsets[i]) for i in pages]
        longest = max(1, max(lengths, default=1))
        half = torch.zeros((len(pages), longest, self.dim), dtype=torch.float16)
        view = half.numpy()
        for j, (i, n) in enumerate(zip(pages, lengths)):
            if n == 0:
                continue
            got = os.preadv(self._fh.fileno(), [memoryview(view[j, :n]).cast("B")], int(self.offsets[i]) * self.dim * 2)
            if got != n * self.dim * 2:
                raise OSError(f"{self.folder / VECTORS}: page {i} is cut short (the store is truncated)")
            if n < longest:
                view[j, n:] = view[j, 0]
        return half.float()

    def pages(self, index: Sequence[int] | None = None) -> StoredPages:
        return StoredPages(self, index)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def exact_scores(queries: Sequence[np.ndarray], store: PageStore, memory_budget_mb: float = 512.0) -> np.ndarray:
    """Exact MaxSim of every query against every stored page, (nq, pages) float32: the same scorer
    as in memory (late_interaction.maxsim), fed one padded block of stored pages at a time."""
    from lookalike.retrieval.late_interaction import maxsim

    return maxsim(queries, store.pages(), memory_budget_mb)


@dataclass
class CentroidIndex:
    """Per-page centroids in a PageStore of their own (clusters vectors per page)."""

    store: PageStore
    clusters: int
    seconds: float

    @classmethod
    def build(cls, pages: PageStore, folder: Path | str, clusters: int = 32) -> "CentroidIndex":
        import time

        t0 = time.perf_counter()
        store = PageStore.write(folder, pages.ids, centroid_pages(pages.pages(), clusters), pages.dim,
                                f"centroids:{clusters}")
        return cls(store, clusters, time.perf_counter() - t0)


def rescore(queries: Sequence[np.ndarray], pages, cand: np.ndarray, block_pages: int = 32) -> np.ndarray:
    """Exact MaxSim of each query against its candidate pages (cand: (nq, n) page positions),
    (nq, n) float32 in cand's order. Page-major: every candidate page is read once, in blocks of
    block_pages, and scored for the queries that asked for a page of the block (the same scorer
    and token order as late_interaction.maxsim, so the same bits). pages: a PageStore, its
    StoredPages, or a list of arrays."""
    import torch

    from lookalike.retrieval.late_interaction import padded_block, token_sum

    if isinstance(pages, PageStore):
        pages = pages.pages()
    nq = len(queries)
    dim = int(np.asarray(queries[0]).shape[1])
    qlen = max(len(q) for q in queries)
    Q = torch.zeros((nq, qlen, dim), dtype=torch.float32)
    for i, q in enumerate(queries):
        Q[i, : len(q)] = torch.as_tensor(np.asarray(q, dtype=np.float32))
    wanted: dict[int, list[int]] = {}
    for qi in range(nq):
        for p in cand[qi]:
            wanted.setdefault(int(p), []).append(qi)
    union = sorted(wanted)
    got: dict[tuple[int, int], float] = {}
    with torch.no_grad():
        for s in range(0, len(union), block_pages):
            block_ids = union[s:s + block_pages]
            block = padded_block(pages, block_ids, dim)                # (m, L, d): read once
            for j, p in enumerate(block_ids):
                need = wanted[p]
                # only the queries that asked for this page: one GEMM of their tokens against it
                sims = Q[need].reshape(-1, dim) @ block[j].T
                best = token_sum(sims.view(len(need), qlen, 1, -1).amax(dim=3)).numpy()[:, 0]
                for r, qi in enumerate(need):
                    got[(qi, p)] = float(best[r])
    return np.asarray([[got[(qi, int(p))] for p in cand[qi]] for qi in range(nq)], dtype=np.float32)


def centroid_pages(pages: Sequence[np.ndarray], clusters: int = 32, block_pages: int = 512):
    """Each page's centroids (pruning.page_balls: farthest-point seeds, member means), a page at a
    time (a generator: what PageStore.write takes)."""
    from lookalike.retrieval.pruning import page_balls

    for s in range(0, len(pages), block_pages):
        chunk = [np.asarray(pages[i], dtype=np.float32) for i in range(s, min(len(pages), s + block_pages))]
        balls = page_balls(chunk, clusters=clusters)
        centres, live = balls.centres.numpy(), np.isfinite(balls.radii.numpy())
        for j in range(len(chunk)):
            c = centres[j][live[j]]
            yield c if len(c) else np.zeros((1, centres.shape[2]), np.float32)


def candidate_search(queries: Sequence[np.ndarray], pages, centroids, k: int, n_candidates: int,
                     memory_budget_mb: float = 512.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(idx, scores, candidates): each query's top k by exact MaxSim among its n_candidates best
    pages by centroid MaxSim; idx / scores (nq, k) in canonical order (score desc, then page
    position); candidates (nq, n_candidates) page positions, sorted. pages / centroids: PageStores,
    a CentroidIndex, or in-memory lists of arrays (one centroid matrix per page)."""
    from lookalike.retrieval.late_interaction import maxsim

    if isinstance(centroids, CentroidIndex):
        centroids = centroids.store
    if isinstance(centroids, PageStore):
        centroids = centroids.pages()
    approx = maxsim(queries, centroids, memory_budget_mb)
    n = min(n_candidates, len(pages))
    cand = np.sort(np.argsort(-approx, axis=1, kind="stable")[:, :n], axis=1)
    exact = rescore(queries, pages, cand)
    k = min(k, n)
    idx = np.empty((len(queries), k), dtype=np.int64)
    scores = np.empty((len(queries), k), dtype=np.float32)
    for qi in range(len(queries)):
        top = np.lexsort((cand[qi], -exact[qi]))[:k]
        idx[qi], scores[qi] = cand[qi][top], exact[qi][top]
    return idx, scores, cand


def topk(scores: np.ndarray, k: int) -> np.ndarray:
    """Each row's top k positions in canonical order (score desc, then position)."""
    out = np.empty((scores.shape[0], min(k, scores.shape[1])), dtype=np.int64)
    for i, row in enumerate(scores):
        out[i] = np.lexsort((np.arange(len(row)), -row))[: out.shape[1]]
    return out


def candidate_recall(exact_top: np.ndarray, candidates: np.ndarray, ks: Sequence[int] = (10, 100)) -> dict[int, float]:
    """Share of each query's exact top k (exact_top: canonical order) present among its candidates,
    averaged over the queries: {k: recall}."""
    out = {}
    for k in ks:
        hits = [len(set(exact_top[i, :k]) & set(candidates[i])) / max(1, min(k, exact_top.shape[1]))
                for i in range(len(exact_top))]
        out[k] = float(np.mean(hits)) if hits else float("nan")
    return out
