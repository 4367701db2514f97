"""The encoder interface and the vectors it produces.

An encoder turns units (page images, or their caption fields) and query texts into vectors:
one per item (single-vector) or a matrix per item (multi-vector), plus, for BM25, plain text.
Each encoder states the provenance of what it reads — ``pixels``, ``caption-text`` or
``metadata`` — and every Vectors object carries it, so an index can refuse what it must not see
(lookalike.retrieve). Its id (name, model revision, settings) keys the cache: change any of them
and nothing stale comes back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd

PROVENANCES = ("pixels", "caption-text", "metadata")


class EncodeError(RuntimeError):
    """An encoder could not read a unit or load its model; the message says which and how to fix it."""


@dataclass
class Vectors:
    """Encoder output for a list of items (units or queries).

    data: float32 array (n, dim) when single-vector; list of (tokens_i, dim) arrays when
    multi-vector; list of str when kind == "text" (BM25).
    """

    encoder_id: str
    provenance: str
    ids: list[str]
    data: Any              # by kind, as the docstring says: the readers branch on kind
    kind: str = "single"            # single | multi | text
    stats: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def stored(self) -> bool:
        """Multi-vector pages held in an on-disk PageStore (retrieval.store), read when asked for."""
        return hasattr(self.data, "store") and hasattr(self.data, "lengths")

    @property
    def dim(self) -> int:
        """The vectors' dimension (0 for text)."""
        if self.kind == "single":
            return int(self.data.shape[1])
        if self.kind == "multi":
            if self.stored:
                return int(self.data.store.dim)
            return int(self.data[0].shape[1]) if len(self.data) else 0
        return 0

    def token_counts(self) -> np.ndarray:
        """Vectors per item (multi-vector), int64; read from the store's offsets when stored."""
        if self.stored:
            return self.data.lengths()
        return np.asarray([len(m) for m in self.data], dtype=np.int64)

    def take(self, rows: Sequence[int]) -> Vectors:
        """These vectors' items at rows (positions), in that order: a block of queries to score."""
        rows = list(rows)
        # a stored page list reads each page from its PageStore as it is indexed
        data = np.asarray(self.data)[rows] if self.kind == "single" else [self.data[i] for i in rows]
        return replace(self, ids=[self.ids[i] for i in rows], data=data)

    def describe(self) -> str:
        """The shape in words, for stage 02's encoders table: items x dimension, and how they are held."""
        if self.kind == "single":
            return f"{len(self)} x {self.dim} float32"
        if self.kind == "multi":
            lengths = self.token_counts()
            where = " float16 on disk" if self.stored else ""
            return f"{len(self)} x (≤{lengths.max() if len(lengths) else 0} tokens) x {self.dim}{where}"
        return f"{len(self)} texts"

    def save(self, folder: Path | str, name: str) -> Path:
        """Write vectors to folder/name.npz (ids, provenance and encoder id included). Stored
        multi-vector pages stay in their PageStore: the npz names it (a folder beside the npz,
        copied there if it lives elsewhere) instead of holding the vectors."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        meta = {"encoder_id": self.encoder_id, "provenance": self.provenance, "kind": self.kind}
        arrays = {"ids": np.asarray(self.ids, dtype=str), "meta": None}      # meta is set below, in this place
        if self.kind == "multi" and self.stored:
            store_dir = self._place_store(folder / f"{name}.pages")
            meta["store"] = store_dir.name
        elif self.kind == "single":
            arrays["data"] = self.data
        elif self.kind == "multi":
            arrays["lengths"] = np.asarray([len(m) for m in self.data])
            arrays["data"] = np.concatenate(self.data) if self.data else np.zeros((0, 0), np.float32)
        else:
            arrays["data"] = np.asarray(self.data, dtype=str)
        arrays["meta"] = np.asarray(json.dumps(meta))
        path = folder / f"{name}.npz"
        np.savez(path, **arrays)
        return path

    def _place_store(self, target: Path) -> Path:
        """The folder of this Vectors' PageStore at target: the store itself when it is there, else a
        copy of exactly its pages (in this Vectors' order), written page by page."""
        from lookalike.retrieval.store import PageStore

        pages = self.data
        if pages.store.folder.resolve() == target.resolve() and list(pages.store.ids) == list(self.ids):
            return target
        PageStore.write(target, self.ids, (pages[i] for i in range(len(pages))), pages.store.dim,
                        pages.store.encoder_id)
        return target

    @classmethod
    def load(cls, path: Path | str) -> Vectors:
        """Vectors saved with save() (an .npz, and the page store beside it for stored multi-vector pages)."""
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            ids = [str(x) for x in z["ids"]]
            if meta["kind"] == "multi" and "store" in meta:
                from lookalike.retrieval.store import PageStore

                store = PageStore(Path(path).parent / meta["store"])
                if list(store.ids) != ids:
                    raise ValueError(f"{path}: its page store {store.folder} holds other units than the npz lists")
                data = store.pages()
            elif meta["kind"] == "multi":
                data = np.split(z["data"], np.cumsum(z["lengths"])[:-1]) if len(ids) else []
            elif meta["kind"] == "text":
                data = [str(x) for x in z["data"]]
            else:
                data = z["data"]
        return cls(meta["encoder_id"], meta["provenance"], ids, data, meta["kind"])


def _no_cuda_driver() -> bool:
    """True when this Linux machine has no NVIDIA driver library (libcuda.so.1, which the CUDA
    runtime loads): then torch.cuda.is_available() is False for certain, and saying so costs no
    ``import torch`` (2-2.5 s here, paid by every stage that makes an encoder, even over a warm
    cache). Anywhere else, or with the library present, torch is asked as before."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return True
    return False


def resolve_device(device: str = "auto") -> tuple[str, str]:
    """(device, dtype): auto -> ('cuda', 'bfloat16') when a GPU is present, else ('cpu', 'float32')."""
    if device == "cpu" or (device == "auto" and _no_cuda_driver()):
        return "cpu", "float32"
    import torch

    if device == "auto":
        return ("cuda", "bfloat16") if torch.cuda.is_available() else ("cpu", "float32")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EncodeError(f"device {device!r} requested but no CUDA device is available; use device: auto or cpu")
    return device, ("bfloat16" if device.startswith("cuda") else "float32")


class Encoder:
    """Base class. Subclasses set name, provenance, kind and implement _encode_units / encode_queries."""

    name = "encoder"
    provenance = "pixels"
    kind = "single"
    revision = "1"
    # a multi-vector encoder whose encode_units takes store_dir streams its pages into the run's float16
    # page store as it makes them (memory holds one batch); one that does not has its result written there
    streams_to_store = False

    def __init__(self, device: str = "auto", batch_size: int = 32, progress: bool | None = None, **settings):
        self.device, self.dtype = resolve_device(device)
        self.batch_size = batch_size
        # progress bars unless the caller says no: lookalike.progress draws them on the runner's terminal (or an
        # interactive stderr) and never in a notebook, so the runner's TQDM_DISABLE (which keeps other libraries'
        # bars out of stored notebooks) must not silence them
        self.progress = True if progress is None else progress
        self.settings = settings

    @property
    def id(self) -> str:
        """Name, model revision, every setting that changes the output, and the device class and
        numeric precision (bf16 GPU vectors and fp32 CPU vectors never share a cache entry); not the
        device index or the batch size."""
        device_class = str(self.device).split(":")[0]
        return f"{self.name}@{self.revision}:{json.dumps(self.settings, sort_keys=True)}|{device_class}/{self.dtype}"

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache=None) -> Vectors:
        """One item per units["unit_id"], in order (a unit it cannot read in stats["failed"])."""
        raise NotImplementedError

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        """The questions in the same space as the units, one item per id."""
        raise NotImplementedError

    def pending(self, units: pd.DataFrame, base_dir: Path, cache) -> list[int] | None:
        """Positions of the units whose result the cache lacks, in order; None when the encoder
        cannot tell. The Ray engine (retrieval.engine) batches only these, as encode_units would
        on this cache; with None it sends every unit and encode_units skips what is held."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} device={self.device}>"


def cached_pages(enc: Encoder, units: pd.DataFrame, base_dir: Path, cache, embed, sink=None
                 ) -> tuple[list[str], list | None, dict]:
    """The page-image loop an image encoder shares: each unit's vector from the cache (keyed by the
    image's sha256 and enc.id), else embed(list of RGB images) in batches of enc.batch_size, then
    cached. A page that cannot be read is reported in stats["failed"] as (unit_id, reason) and
    left out, not the whole pass. Returns (kept ids, their vectors, stats).

    sink: a writer with append(unit_id, vector) (retrieval.store.PageWriter): every kept vector is
    handed to it in unit order as soon as the pages before it are done, and none is kept here (the
    vectors returned are None) — memory holds one batch, whatever the corpus size. The batches are
    the same either way (the units the cache lacks, enc.batch_size at a time), so are the vectors."""
    import time

    from PIL import Image

    from lookalike import progress as bars
    from lookalike.data.schema import resolve_image
    from lookalike.io.cache import image_sha256

    t0 = time.perf_counter()
    ids = list(units["unit_id"])
    paths = [resolve_image(p, base_dir) for p in units["image_path"]]
    shas = [image_sha256(p) for p in paths]
    if sink is None:
        vecs = [cache.get_array(s, enc.id) for s in shas]
        todo = [i for i, v in enumerate(vecs) if v is None]
    else:                                   # existence only: each vector is read when its turn comes
        vecs = [None] * len(ids)
        todo = [i for i, s in enumerate(shas) if not cache.holds_array(s, enc.id)]
    failed: list[tuple[str, str]] = []
    failed_at: set[int] = set()
    done = 0                                # sink: units before this position are handed over

    def hand_over(upto: int) -> None:
        nonlocal done
        for i in range(done, upto):
            if i in failed_at:
                continue
            v = vecs[i] if vecs[i] is not None else cache.get_array(shas[i], enc.id)
            if v is None:                   # held a moment ago, unreadable now (a corrupt entry the cache dropped)
                v = encode([i])
                if v is None:
                    continue
            sink.append(ids[i], v)
            vecs[i] = None
        done = max(done, upto)

    def encode(batch: list[int]):
        """Embed the pages at positions batch, cache them; the last one's vector (None if unreadable)."""
        chunk, images = [], []
        for i in batch:
            try:
                with Image.open(paths[i]) as im:
                    images.append(im.convert("RGB"))
                chunk.append(i)
            except OSError as exc:
                failed.append((ids[i], f"{paths[i]}: cannot read image ({exc})"))
                failed_at.add(i)
        if images:
            for i, v in zip(chunk, embed(images)):
                vecs[i] = np.asarray(v, dtype=np.float32)
                cache.put_array(shas[i], enc.id, vecs[i])
        return vecs[batch[-1]] if batch else None

    for start in bars.bar(range(0, len(todo), enc.batch_size), desc=f"{enc.name} pages", unit="batch",
                          min_total=max(1, bars.MIN_TOTAL // enc.batch_size)):
        encode(todo[start:start + enc.batch_size])
        if sink is not None:
            hand_over(todo[min(len(todo), start + enc.batch_size) - 1] + 1)
    if sink is not None:
        hand_over(len(ids))
    keep = [i for i in range(len(ids)) if i not in failed_at]
    stats = {"computed": len(todo) - len(failed_at & set(todo)), "cached": len(ids) - len(todo),
             "failed": failed, "seconds": round(time.perf_counter() - t0, 2)}
    if sink is not None:
        return [ids[i] for i in keep], None, stats
    return [ids[i] for i in keep], [vecs[i] for i in keep], stats


def pending_pages(units: pd.DataFrame, base_dir: Path, cache, key: str) -> list[int]:
    """Positions of the units whose page has no cache entry under key (encoders built on
    cached_pages use their id). A page that cannot be read counts as pending: its encoder reports it."""
    from lookalike.data.schema import resolve_image
    from lookalike.io.cache import image_sha256

    out = []
    for i, p in enumerate(units["image_path"]):
        try:
            held = cache.holds_array(image_sha256(resolve_image(p, base_dir)), key)
        except OSError:
            held = False
        if not held:
            out.append(i)
    return out
