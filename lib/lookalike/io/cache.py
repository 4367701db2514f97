"""On-disk cache of per-unit encoder outputs (OCR text, vectors).

Key: sha256 of the unit's image bytes + the encoder id (name, model revision, settings), so a
changed image, model or setting can never return a stale entry. Each file holds the payload
followed by the sha256 of the payload; a truncated or corrupt file fails that check, is deleted
and recomputed. Writes go to a temporary file renamed into place, so a killed run leaves no
half-written entry. The default location is ~/.cache/lookalike (or $LOOKALIKE_CACHE), shared by
every run on the machine: the keys make sharing safe.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

DIGEST = 32


def default_cache_dir() -> Path:
    """The cache folder: LOOKALIKE_CACHE when set, else ~/.cache/lookalike."""
    return Path(os.environ.get("LOOKALIKE_CACHE") or Path.home() / ".cache" / "lookalike")


def image_sha256(path: Path | str) -> str:
    """The sha256 (hex) of a file's bytes: what a cache entry of its image is keyed by."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Cache:
    """get/put of bytes-serialisable values under (image sha256, encoder id). Counts hits and misses."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root else default_cache_dir()
        self.hits = 0
        self.misses = 0
        self.corrupt = 0
        self.writes = 0

    def _path(self, image_sha: str, encoder_id: str, suffix: str) -> Path:
        enc = hashlib.sha256(encoder_id.encode("utf-8")).hexdigest()[:16]
        return self.root / enc / image_sha[:2] / f"{image_sha}.{suffix}"

    def _read(self, path: Path) -> bytes | None:
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        payload, digest = blob[:-DIGEST], blob[-DIGEST:]
        if len(blob) < DIGEST or hashlib.sha256(payload).digest() != digest:
            self.corrupt += 1
            path.unlink(missing_ok=True)
            return None
        return payload

    def _write(self, path: Path, payload: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload + hashlib.sha256(payload).digest())
        os.replace(tmp, path)
        self.writes += 1

    def get_text(self, image_sha: str, encoder_id: str) -> str | None:
        """The text cached for this image and encoder (OCR, a text layer), or None; counted as a hit or a
        miss."""
        payload = self._read(self._path(image_sha, encoder_id, "txt"))
        self._count(payload)
        return None if payload is None else payload.decode("utf-8")

    def put_text(self, image_sha: str, encoder_id: str, text: str) -> None:
        """Cache this image's text for this encoder (written to a temporary file, renamed into place)."""
        self._write(self._path(image_sha, encoder_id, "txt"), text.encode("utf-8"))

    def holds_array(self, image_sha: str, encoder_id: str) -> bool:
        """Whether an entry exists (not read, not checked, not counted): a cheap question for
        planning work. A corrupt entry still fails get_array's check and is recomputed there."""
        return self._path(image_sha, encoder_id, "npy").is_file()

    def get_array(self, image_sha: str, encoder_id: str) -> np.ndarray | None:
        """The array cached for this image and encoder, or None (a missing or corrupt entry); counted."""
        payload = self._read(self._path(image_sha, encoder_id, "npy"))
        self._count(payload)
        if payload is None:
            return None
        return np.load(io.BytesIO(payload), allow_pickle=False)

    def put_array(self, image_sha: str, encoder_id: str, array: np.ndarray) -> None:
        """Cache this image's array for this encoder (written to a temporary file, renamed into place)."""
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
        self._write(self._path(image_sha, encoder_id, "npy"), buf.getvalue())

    def _count(self, payload) -> None:
        if payload is None:
            self.misses += 1
        else:
            self.hits += 1

    def stats(self) -> dict:
        """Hits, misses and corrupt entries met so far (a corrupt entry is recomputed, not trusted)."""
        return {"hits": self.hits, "misses": self.misses, "corrupt": self.corrupt}

    def describe(self) -> str:
        """stats() as one line of JSON, for a stage's encoders table."""
        return json.dumps(self.stats())
