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
   against those centroids, computed in int8 (``Int8Centroids``: one scale for the index, one per
   query token, exact integer dot products) — clusters / tokens of the exact work, on integer
   units that run several times faster than float32 GEMM on CPUs with VNNI;
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
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

VECTORS, OFFSETS, IDS, META = "vectors.f16", "offsets.npy", "ids.json", "meta.json"


FIRST_STAGE_BLOCK_MB = 8.0


_INT_MM: bool | None = None


def int8_dots(a, b):
    """a (m, d) @ b (d, n) for int8 tensors, as exact int32.

    torch._int_mm (oneDNN: AVX-512 VNNI / AVX-VNNI where the CPU has them; measured about 9x this
    machine's float32 GEMM on the first stage's blocks) when this torch has it; otherwise a
    float32 GEMM of the same integers, which is exact too: every partial sum is an integer of at
    most d x 127 x 127 < 2**24 for d <= 1040, so float32 holds it without rounding, in any order.
    Either way the same integers come out."""
    global _INT_MM
    import torch

    if _INT_MM is None:
        try:
            probe = torch.ones((2, 8), dtype=torch.int8)
            _INT_MM = bool(torch.equal(torch._int_mm(probe, probe.T), torch.full((2, 2), 8, dtype=torch.int32)))
        except (AttributeError, RuntimeError, NotImplementedError):
            _INT_MM = False
    if _INT_MM:
        return torch._int_mm(a, b)
    return (a.float() @ b.float()).to(torch.int32)


INT8_MAX_DIM = 1040                 # d x 127 x 127 < 2**24: the float32 fallback of int8_dots stays exact


def _abs_max_half(pages, chunk: int = 1 << 23) -> float:
    """The largest |component| of pages once rounded to float16 (as Int8Centroids stores them):
    a PageStore's vector file read straight through in chunks of `chunk` components (16 MiB), or
    in-memory arrays page by page (rounding is monotonic, so the float16 of the largest |x|)."""
    import torch

    if isinstance(pages, PageStore):
        total = int(pages.offsets[-1]) * pages.dim
        if not total:
            return 0.0
        data = np.memmap(pages.folder / VECTORS, dtype=np.float16, mode="r", shape=(total,))
        return max(float(torch.from_numpy(np.array(data[s:s + chunk])).abs().max()) for s in range(0, total, chunk))
    top = max((float(np.abs(np.asarray(p, dtype=np.float32)).max(initial=0.0)) for p in pages), default=0.0)
    return float(np.float16(top))


class Int8Centroids:
    """Per-page centroids for the first stage, padded once to the widest page (a page's padding
    repeats its first vector, which changes no maximum) and quantized once to int8 with one scale
    for the whole index: c ~ scale x round(c / scale), scale = max |component| / 127 (symmetric, so
    0 stays 0). Built a block of pages at a time from a PageStore (its float16 vectors) or from
    in-memory arrays (rounded to float16 first, so both give the same bytes); 1 byte per component.

    ``scores(queries)`` is the first stage's approximate MaxSim: each query token t is quantized
    with its own scale s_t = max |t_i| / 127, and score(q, p) = scale x sum_t s_t x max_c <t, c>
    with <t, c> the exact integer dot product (int8_dots). The ranking it gives is an approximation
    of centroid MaxSim -- which is itself one of exact MaxSim -- so what counts is the candidate
    recall against exact, which stage 02 and benchmarks/scale.py measure."""

    def __init__(self, pages, dim: int, block_pages: int = 4096):
        import torch

        from lookalike.retrieval.late_interaction import padded_block

        if dim > INT8_MAX_DIM:
            raise ValueError(f"int8 first stage: vectors of {dim} dimensions; at most {INT8_MAX_DIM} are exact")
        n = len(pages)
        if isinstance(pages, PageStore):
            lengths = (pages.offsets[1:] - pages.offsets[:-1]).astype(np.int64)
            read = lambda idx: pages.block(idx, half=True)                          # noqa: E731
        else:
            lengths = np.asarray([len(p) for p in pages], dtype=np.int64)
            read = lambda idx: padded_block(pages, idx, dim).half()                 # noqa: E731
        self.dim = int(dim)
        self.width = int(max(1, lengths.max(initial=1)))
        spans = [(s, min(n, s + block_pages)) for s in range(0, n, block_pages)]

        def widened(s: int, e: int):
            block = read(list(range(s, e))).float()
            if block.shape[1] < self.width:                   # pad to the index's width, as padded_block does
                block = torch.cat([block, block[:, :1].expand(-1, self.width - block.shape[1], -1)], dim=1)
            return block

        top = _abs_max_half(pages)                          # the scale, from one plain read
        self.scale = top / 127.0 if top > 0 else 1.0
        self.tensor = torch.zeros((n, self.width, self.dim), dtype=torch.int8)
        for s, e in spans:                                  # then quantized, a block of pages at a time
            self.tensor[s:e] = torch.round(widened(s, e) / self.scale).clamp_(-127, 127).to(torch.int8)

    def __len__(self) -> int:
        return int(self.tensor.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes these pages' vectors hold in memory."""
        return int(self.tensor.numel())

    def scores(self, queries: Sequence[np.ndarray], memory_budget_mb: float = 8.0) -> np.ndarray:
        """(nq, pages) float32 approximate scores (see the class). Pages are taken in blocks whose
        int32 similarities fit memory_budget_mb; the integer part is exact and each (query, page)
        is summed in the same fixed token order, so blocking never changes a score."""
        import torch

        from lookalike.retrieval.late_interaction import padded_queries, token_sum

        nq, n = len(queries), len(self)
        out = np.zeros((nq, n), dtype=np.float32)
        if not nq or not n:
            return out
        Q = padded_queries(queries, self.dim)
        qlen = Q.shape[1]
        qscale = Q.abs().amax(dim=2) / 127.0                                            # (nq, qlen)
        safe = torch.where(qscale > 0, qscale, torch.ones_like(qscale))
        Qi = torch.round(Q / safe[:, :, None]).clamp_(-127, 127).to(torch.int8).reshape(nq * qlen, self.dim)
        flat = self.tensor.reshape(n * self.width, self.dim)
        per_block = int(max(1, (memory_budget_mb * 2**20 / 4) // (nq * qlen * self.width)))
        with torch.no_grad():
            for s in range(0, n, per_block):
                e = min(n, s + per_block)
                dots = int8_dots(Qi, flat[s * self.width: e * self.width].T)
                best = dots.view(nq, qlen, e - s, self.width).amax(dim=3).float()      # exact integers
                out[:, s:e] = (token_sum(best * qscale[:, :, None]) * self.scale).numpy()
        return out


class StoredPages(Sequence):
    """A PageStore's pages as a sequence of float32 (tokens, dim) arrays, each read when asked for."""

    def __init__(self, store: PageStore, index: Sequence[int] | None = None):
        self.store = store
        self.index = np.arange(len(store)) if index is None else np.asarray(index, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return StoredPages(self.store, self.index[i])
        return self.store.read(int(self.index[i]))

    def lengths(self) -> np.ndarray:
        """Each page's number of vectors (tokens), in this view's order."""
        o = self.store.offsets
        return (o[self.index + 1] - o[self.index]).astype(np.int64)

    def by_id(self) -> StoredPagesById:
        """The pages as a read-only mapping unit id -> float32 page, each read when asked for."""
        return StoredPagesById(self)

    def block(self, idx: Sequence[int]):
        """Pages idx (positions in this sequence) as one padded (m, longest, d) float32 tensor, the
        same as late_interaction.padded_block gives: read as float16 straight into the block,
        padded by repeating each page's first vector, converted once."""
        return self.store.block([int(self.index[i]) for i in idx])


class StoredPagesById(Mapping):
    """StoredPages keyed by unit id (what a reranker looks pages up by); nothing is read until asked."""

    def __init__(self, pages: StoredPages):
        self.pages = pages
        self._pos = {pages.store.ids[int(i)]: j for j, i in enumerate(pages.index)}

    def __getitem__(self, unit_id):
        return self.pages[self._pos[unit_id]]

    def __contains__(self, unit_id) -> bool:
        return unit_id in self._pos

    def __iter__(self):
        return iter(self._pos)

    def __len__(self) -> int:
        return len(self._pos)


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
              encoder_id: str = "") -> PageStore:
        """Write pages (an iterable: a generator keeps memory flat) as float16, in ids order."""
        writer = PageWriter(folder, dim, encoder_id)
        ids = list(ids)
        for n, page in enumerate(pages):
            writer.append(ids[n] if n < len(ids) else f"#{n}", page)
        if writer.count != len(ids):
            writer.abort()
            raise ValueError(f"{folder}: {writer.count} pages written for {len(ids)} ids")
        return writer.close()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """Bytes the stored pages take on disk (float16)."""
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

    def block(self, pages: Sequence[int], half: bool = False):
        """Stored pages as one padded float32 tensor (m, longest, d) (see StoredPages.block);
        half: keep it float16."""
        import torch

        if self._fh is None:
            self._fh = open(self.folder / VECTORS, "rb")
        lengths = [int(self.offsets[i + 1] - self.offsets[i]) for i in pages]
        longest = max(1, max(lengths, default=1))
        keep_half = half
        half_t = torch.zeros((len(pages), longest, self.dim), dtype=torch.float16)
        view = half_t.numpy()
        for j, (i, n) in enumerate(zip(pages, lengths)):
            if n == 0:
                continue
            got = os.preadv(self._fh.fileno(), [memoryview(view[j, :n]).cast("B")], int(self.offsets[i]) * self.dim * 2)
            if got != n * self.dim * 2:
                raise OSError(f"{self.folder / VECTORS}: page {i} is cut short (the store is truncated)")
            if n < longest:
                view[j, n:] = view[j, 0]
        return half_t if keep_half else half_t.float()

    def pages(self, index: Sequence[int] | None = None) -> StoredPages:
        """A view of the stored pages (all, or those at index), read from disk as they are indexed."""
        return StoredPages(self, index)

    def close(self) -> None:
        """Close the store's file (reading a page opens it again)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class PageWriter:
    """A PageStore written one page at a time (memory: one page), in the order pages are appended.

    dim may be None: the first page sets it. A page that is not (tokens, dim), or whose values do
    not survive float16 (beyond +-65504, or not finite), is refused with its unit id — a corrupt
    vector never enters a store. ``close()`` writes the offsets, ids and meta and returns the store;
    until then the folder holds no store (an interrupted encode leaves nothing readable)."""

    def __init__(self, folder: Path | str, dim: int | None = None, encoder_id: str = ""):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in (META, OFFSETS, IDS):                 # an older store here is replaced, never mixed in
            (self.folder / name).unlink(missing_ok=True)
        self.dim, self.encoder_id = dim, encoder_id
        self.ids: list[str] = []
        self.offsets = [0]
        self._fh = open(self.folder / VECTORS, "wb")

    @property
    def count(self) -> int:
        """Pages written so far."""
        return len(self.ids)

    def append(self, unit_id: str, page) -> None:
        """Write one page's vectors (tokens, dim) at the end of the store under unit_id; the dimension is
        fixed by the first page."""
        page = np.asarray(page)
        if self.dim is None and page.ndim == 2:
            self.dim = int(page.shape[1])
        if page.ndim != 2 or page.shape[1] != self.dim:
            self.abort()
            raise ValueError(f"{self.folder}: unit {unit_id!r} has vectors of shape {page.shape}, expected "
                             f"(tokens, {self.dim})")
        half = np.ascontiguousarray(page, dtype=np.float16)
        if not np.isfinite(half).all():
            self.abort()
            raise ValueError(f"{self.folder}: unit {unit_id!r} has vectors that are not finite in float16 "
                             f"(|x| > 65504, inf or nan); the store keeps float16")
        self._fh.write(half.tobytes())
        self.ids.append(str(unit_id))
        self.offsets.append(self.offsets[-1] + len(page))

    def close(self) -> PageStore:
        """Finish the store (offsets, ids and metadata written beside the vectors) and open it for reading."""
        self._fh.close()
        np.save(self.folder / OFFSETS, np.asarray(self.offsets, dtype=np.int64))
        (self.folder / IDS).write_text(json.dumps(self.ids))
        (self.folder / META).write_text(json.dumps({"dim": int(self.dim or 0), "dtype": "float16",
                                                    "encoder_id": self.encoder_id}))
        return PageStore(self.folder)

    def abort(self) -> None:
        """Close the file without writing the offsets, ids and metadata: a refused page leaves no finished store."""
        if not self._fh.closed:
            self._fh.close()


def exact_scores(queries: Sequence[np.ndarray], store: PageStore, memory_budget_mb: float = 512.0) -> np.ndarray:
    """Exact MaxSim of every query against every stored page, (nq, pages) float32: the same scorer
    as in memory (late_interaction.maxsim), fed one padded block of stored pages at a time."""
    from lookalike.retrieval.late_interaction import maxsim

    return maxsim(queries, store.pages(), memory_budget_mb)


# bytes per (question, page) cell while exact_topk merges a chunk: float32 scores, int64 positions,
# the partition's copy, the argsort's int64 order and the gathered results, and two masks
TOPK_BYTES_PER_CELL = 48


def exact_topk(queries: Sequence[np.ndarray], pages, k: int, memory_budget_mb: float = 512.0,
               device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Each query's exact top k by MaxSim over every page, without a (queries x pages) matrix:
    pages are scored a chunk at a time (late_interaction.maxsim, the same bits as over all pages at
    once) and merged into a running top k that keeps every page tied with the k-th score, so the
    canonical tie rule can still be applied to the result. Returns (idx, scores), (nq, w) with
    w >= k, unordered within a row, padded with -1 / -inf. Memory: a chunk's scores and the
    running top k with their merge temporaries (TOPK_BYTES_PER_CELL per question and page), held
    within memory_budget_mb down to a floor of 4k pages per chunk, plus maxsim's own blocks — so it
    grows with the questions (as the run itself does), never with the corpus."""
    from lookalike.retrieval.late_interaction import maxsim

    nq, n = len(queries), len(pages)
    k = max(1, min(int(k), n))
    best_i = np.full((nq, 0), -1, dtype=np.int64)
    best_s = np.full((nq, 0), -np.inf, dtype=np.float32)
    if not nq or not n:
        return best_i, best_s
    chunk = int(max(4 * k, 256, (memory_budget_mb * 2**20 / TOPK_BYTES_PER_CELL) // nq))
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        scores = np.concatenate([best_s, maxsim(queries, pages[s:e], memory_budget_mb, device)], axis=1)
        idx = np.concatenate([best_i, np.broadcast_to(np.arange(s, e), (nq, e - s))], axis=1)
        live = idx >= 0
        kth = -np.partition(-np.where(live, scores, -np.inf), min(k, scores.shape[1]) - 1, axis=1)[:, min(k, scores.shape[1]) - 1]
        keep = live & (scores >= kth[:, None])
        width = int(keep.sum(axis=1).max())
        order = np.argsort(~keep, axis=1, kind="stable")[:, :width]
        kept = np.take_along_axis(keep, order, axis=1)
        best_i = np.where(kept, np.take_along_axis(idx, order, axis=1), -1)
        best_s = np.where(kept, np.take_along_axis(scores, order, axis=1), -np.inf).astype(np.float32)
    return best_i, best_s


@dataclass
class CentroidIndex:
    """Per-page centroids in a PageStore of their own (clusters vectors per page)."""

    store: PageStore
    clusters: int
    seconds: float
    _first: Int8Centroids | None = None

    def first_stage(self) -> Int8Centroids:
        """The centroids in memory for the first stage: padded and quantized once (int8: clusters x
        dim bytes per page)."""
        if self._first is None:
            self._first = Int8Centroids(self.store, self.store.dim)
        return self._first

    @classmethod
    def build(cls, pages: PageStore, folder: Path | str, clusters: int = 64) -> CentroidIndex:
        """Build the centroid index of a page store: each page's vectors reduced to at most `clusters`
        centroids, written to folder."""
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

    from lookalike.retrieval.late_interaction import padded_queries, token_sum

    if isinstance(pages, PageStore):
        pages = pages.pages()
    nq = len(queries)
    dim = int(np.asarray(queries[0]).shape[1])
    Q = padded_queries(queries, dim)
    qlen = Q.shape[1]
    # for every candidate page, the (query, slot in its candidate row) pairs that asked for it
    rows = np.repeat(np.arange(nq), cand.shape[1])
    slots = np.tile(np.arange(cand.shape[1]), nq)
    flat = cand.ravel()
    order = np.argsort(flat, kind="stable")
    pages_sorted, rows, slots = flat[order], rows[order], slots[order]
    union, starts = np.unique(pages_sorted, return_index=True)
    ends = np.append(starts[1:], len(pages_sorted))
    out = np.empty(cand.shape, dtype=np.float32)
    with torch.no_grad():
        for s in range(0, len(union), block_pages):
            block_ids = [int(p) for p in union[s:s + block_pages]]
            maxima, who = [], []
            for j, p in enumerate(block_ids):
                a, b = starts[s + j], ends[s + j]
                need = torch.as_tensor(rows[a:b])
                page = torch.as_tensor(np.asarray(pages[p], dtype=np.float32))          # read once
                if len(page) == 0:
                    page = torch.zeros((1, dim))                       # an empty page scores 0, as in maxsim
                # only the queries that asked for this page: one GEMM of their tokens against it
                sims = Q[need].reshape(-1, dim) @ page.T
                maxima.append(sims.view(b - a, qlen, -1).amax(dim=2))
                who.append((a, b))
            # one fixed-order token sum for the block's pairs (the same bits as maxsim's)
            totals = token_sum(torch.cat(maxima)[:, :, None])[:, 0].numpy()
            lo = who[0][0]
            out[rows[lo:who[-1][1]], slots[lo:who[-1][1]]] = totals
    return out


def centroid_pages(pages: Sequence[np.ndarray], clusters: int = 64, block_pages: int = 512):
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
    pages by the first stage (Int8Centroids.scores: centroid MaxSim in int8); idx / scores (nq, k)
    in canonical order (score desc, then page position); candidates (nq, n_candidates) page positions, sorted. pages / centroids: PageStores,
    a CentroidIndex, an Int8Centroids or in-memory lists of arrays (one centroid matrix per page)."""
    if isinstance(centroids, CentroidIndex):
        centroids = centroids.first_stage()
    if not isinstance(centroids, Int8Centroids):
        # padded and quantized once: the first stage is then one blocked integer GEMM, no copies per call
        centroids = Int8Centroids(centroids, int(np.asarray(queries[0]).shape[1]))
    # int32 similarity blocks of 8 MiB stay in cache: 0.29 s against 0.40 s with 32 MiB blocks on the
    # 10,000-page benchmark store (blocking never changes a score)
    n = min(n_candidates, len(pages))
    # the first stage a block of questions at a time: its (questions x pages) scores and their argsort
    # (12 bytes a cell) stay within memory_budget_mb whatever the corpus size (a question's scores do
    # not depend on the other questions of its block: per-token scales, exact integer products)
    q_block = int(max(1, (memory_budget_mb * 2**20 / 12) // max(1, len(pages))))
    cand = np.empty((len(queries), n), dtype=np.int64)
    for s in range(0, len(queries), q_block):
        approx = centroids.scores(queries[s:s + q_block], min(memory_budget_mb, FIRST_STAGE_BLOCK_MB))
        cand[s:s + q_block] = np.sort(np.argsort(-approx, axis=1, kind="stable")[:, :n], axis=1)
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


def canonical_rows(idx: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """exact_topk's rows as store.topk gives them: the first k positions by (score desc, position
    asc); padding (-1) last. (nq, min(k, width)) int64."""
    out = np.empty((idx.shape[0], min(k, idx.shape[1])), dtype=np.int64)
    for i in range(idx.shape[0]):
        pos = np.where(idx[i] >= 0, idx[i], np.iinfo(np.int64).max)
        out[i] = idx[i][np.lexsort((pos, -scores[i]))[: out.shape[1]]]
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
