"""A hosted embedding model as an encoder: an OpenAI-compatible ``/v1/embeddings`` endpoint.

Texts go in batches as ``{"model": ..., "input": [text, ...], "encoding_format": "float"}``. A
page image goes one per request, as the chat-style embedding request that multimodal servers such
as vLLM take: ``{"model": ..., "messages": [{"role": "user", "content": [{"type": "image_url",
"image_url": {"url": "data:image/png;base64,..."}}, {"type": "text", "text": image_prompt}]}]}``.
A server that embeds text only serves the query and caption side; pages then need another encoder.

* Retries with exponential backoff (``Retry-After`` honoured) on a network error, a timeout, HTTP
  429 or 5xx. Any other HTTP error, or a reply that is not the expected JSON, is not retried: a
  batch that fails that way is split and its items sent one by one. The item that still fails is
  reported in ``Vectors.stats["failed"]`` (its id and the server's reason) and left out of the
  vectors; the rest of the batch is kept.
* Each vector is cached (lookalike.io.cache) under the sha256 of the content -- the text, or the
  image file's bytes -- and the encoder id (endpoint URL and model, dimensions, image prompt), so a
  re-run sends nothing it already has. After every retry with no reply the pass stops
  (EndpointUnavailable): a server that is down is not a page that failed.
* The API key is read from the environment variable named by ``api_key_env`` when a request is
  made. It is never written: not in the encoder id, the cache, the vectors or an error message.

Tested here only against a local HTTP server that a test starts, not against a real model server
(none can be reached from this machine).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lookalike.data.schema import image_data_url, resolve_image
from lookalike.io.cache import Cache, image_sha256
from lookalike.retrieval.encoders.base import EncodeError, Encoder, Vectors
from lookalike.retrieval.http import JsonClient, ServiceError, ServiceUnavailable, endpoint_url


class EndpointError(EncodeError, ServiceError):
    """The embedding endpoint refused or garbled a request; the message names the item and why."""


class EndpointUnavailable(EndpointError, ServiceUnavailable):
    """No reply after every retry: the server is down or unreachable (the whole pass stops)."""


class EndpointEncoder(Encoder):
    """Units and queries through an OpenAI-compatible embeddings endpoint (single vectors)."""

    name, provenance, kind = "endpoint", "pixels", "single"

    def __init__(self, url: str = "", model: str = "", api_key_env: str = "LOOKALIKE_EMBEDDINGS_API_KEY",
                 dimensions: int = 0, image_prompt: str = "", timeout_s: float = 60.0, retries: int = 4,
                 backoff_s: float = 1.0, **kw):
        if not url or not model:
            raise EncodeError("the endpoint encoder needs a url (the server's base, e.g. http://host:8000/v1) "
                              "and a model name")
        kw.pop("device", None)                        # the model runs on the server
        super().__init__(device="cpu", url=url, model=model, dimensions=int(dimensions), image_prompt=image_prompt,
                         **kw)
        self.url = endpoint_url(url, "/embeddings")
        self.model, self.api_key_env, self.dimensions = model, api_key_env, int(dimensions)
        self.image_prompt = image_prompt
        self.client = JsonClient(self.url, api_key_env, timeout_s, retries, backoff_s, EndpointError,
                                 EndpointUnavailable)
        self.revision = "openai-embeddings-1"

    def _request(self, payload: dict) -> dict:
        return self.client.request(payload)

    @property
    def requests(self) -> int:
        """How many requests the endpoint has been sent (cache hits send none)."""
        return self.client.requests

    def _vectors(self, reply: dict, n: int) -> list[np.ndarray]:
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list) or len(data) != n:
            got = len(data) if isinstance(data, list) else type(data).__name__
            raise EndpointError(f"{self.url}: expected 'data' with {n} embeddings, got {got}")
        out: list[np.ndarray | None] = [None] * n
        for pos, item in enumerate(data):
            index = item.get("index", pos) if isinstance(item, dict) else pos
            emb = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < n or not isinstance(emb, list) or not emb:
                raise EndpointError(f"{self.url}: embedding {pos} of the reply is malformed")
            try:
                vec = np.asarray(emb, dtype=np.float32)
            except (TypeError, ValueError):
                raise EndpointError(f"{self.url}: embedding {pos} of the reply holds non-numbers") from None
            if vec.ndim != 1 or not np.isfinite(vec).all():
                raise EndpointError(f"{self.url}: embedding {pos} of the reply is not a finite vector")
            out[index] = vec
        if any(v is None for v in out):
            raise EndpointError(f"{self.url}: the reply's indexes do not cover the {n} inputs")
        return out  # type: ignore[return-value]

    def _payload(self, **fields) -> dict:
        payload = {"model": self.model, "encoding_format": "float", **fields}
        if self.dimensions:
            payload["dimensions"] = self.dimensions
        return payload

    def _embed_texts(self, texts: list[str]) -> list[np.ndarray | str]:
        """One vector per text, or the reason it failed (a batch that fails is split to find its item)."""
        try:
            return self._vectors(self._request(self._payload(input=texts)), len(texts))
        except EndpointUnavailable:
            raise
        except EndpointError as exc:
            if len(texts) == 1:
                return [str(exc)]
            half = len(texts) // 2
            return self._embed_texts(texts[:half]) + self._embed_texts(texts[half:])

    def _embed_image(self, path: Path) -> np.ndarray | str:
        content = [{"type": "image_url", "image_url": {"url": image_data_url(path)}}]
        if self.image_prompt:
            content.append({"type": "text", "text": self.image_prompt})
        try:
            return self._vectors(self._request(self._payload(messages=[{"role": "user", "content": content}])), 1)[0]
        except EndpointUnavailable:
            raise
        except EndpointError as exc:
            return str(exc)

    # ------------------------------------------------------------------ encoder

    def _cached(self, ids: Sequence[str], keys: Sequence[str], compute, cache: Cache, provenance: str,
                what: str) -> Vectors:
        t0 = time.perf_counter()
        held = [cache.get_array(k, self.id) for k in keys]
        todo = [i for i, v in enumerate(held) if v is None]
        failed: list[tuple[str, str]] = []
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            for i, got in zip(chunk, compute(chunk)):
                if isinstance(got, str):
                    failed.append((ids[i], got))
                else:
                    held[i] = got
                    cache.put_array(keys[i], self.id, got)
        keep = [i for i, v in enumerate(held) if v is not None]
        dims = {held[i].shape[0] for i in keep}
        if len(dims) > 1:
            raise EndpointError(f"{self.url}: the endpoint returned vectors of different sizes {sorted(dims)} "
                                f"for one model")
        data = np.stack([held[i] for i in keep]) if keep else np.zeros((0, 0), np.float32)
        stats = {"computed": len(todo) - len(failed), "cached": len(keys) - len(todo), "requests": self.requests,
                 "failed": failed, "seconds": round(time.perf_counter() - t0, 2), "what": what}
        return Vectors(self.id, provenance, [ids[i] for i in keep], data, "single", stats)

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        """One vector per page image from the endpoint, cached by the image's hash."""
        cache = cache or Cache()
        paths = [resolve_image(p, base_dir) for p in units["image_path"]]
        keys = [image_sha256(str(p)) for p in paths]
        return self._cached(list(units["unit_id"]), keys, lambda chunk: [self._embed_image(paths[i]) for i in chunk],
                            cache, self.provenance, "page images")

    def encode_texts(self, texts: Sequence[str], ids: Sequence[str], provenance: str,
                     cache: Cache | None = None) -> Vectors:
        """One vector per text from the endpoint, cached by the text's hash, with this provenance."""
        texts = [str(t) for t in texts]
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        return self._cached(list(ids), keys, lambda chunk: self._embed_texts([texts[i] for i in chunk]),
                            cache or Cache(), provenance, "texts")

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        """The questions embedded as text (held in memory for this call only, never in the run's cache)."""
        return self.encode_texts(texts, ids, "query-text", Cache())

    def encode_captions(self, texts: Sequence[str], ids: Sequence[str], cache: Cache | None = None) -> Vectors:
        """Caption fields embedded as text by the same model: the leak ablation's caption index for it."""
        return self.encode_texts(texts, ids, "caption-text", cache)
