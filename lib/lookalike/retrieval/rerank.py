"""Reranking: re-score the top ``depth`` of any system's ranking and call the result ``<base>+rerank``.

The design's long-document benchmark reranks the top 25 of a multi-vector retriever. Three
rerankers, chosen by ``rerank.method``:

  endpoint       a ``/v1/rerank`` server — the request shape Jina, Cohere and vLLM share:
                 ``{"model", "query", "documents": [text, ...], "top_n"}`` answered by
                 ``{"results": [{"index", "relevance_score"}, ...]}``. Documents are the pages' OCR
                 text (what the pixels say), so the system still reads pixels only.
  cross-encoder  a local sentence-transformers CrossEncoder (a folder, or a hub id where a hub is
                 reachable) scoring (question, OCR text) pairs.
  maxsim         MaxSim re-scoring with a multi-vector encoder of the run (``rerank.maxsim_encoder``,
                 e.g. colpali): its page vectors from stage 02, its query vectors from the run store.

The reranked run: each question's top ``depth`` in the reranker's order (ties kept in the base
order), then the rest of the base ranking as it was. Scores in the written run are positions
(depth of the list minus rank), so the order is exactly the one described; the reranker's own scores
are kept in ``RerankResult.scores``. A question the reranker could not score keeps its base order
and is counted (``failed``), never dropped. Replies are cached by (reranker id, question, page text).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.retrieval.http import JsonClient, ReplyCache, ServiceError, ServiceUnavailable, endpoint_url

METHODS = ("endpoint", "cross-encoder", "maxsim")
SUFFIX = "+rerank"


class RerankError(ServiceError):
    """A reranker refused a request or returned what cannot be read."""


class RerankUnavailable(RerankError, ServiceUnavailable):
    """The rerank server gave no reply after every retry."""


class EndpointReranker:
    """Scores through an OpenAI-style ``/v1/rerank`` server (Jina / Cohere / vLLM request shape)."""

    def __init__(self, url: str, model: str, api_key_env: str = "LOOKALIKE_RERANK_API_KEY", timeout_s: float = 60.0,
                 retries: int = 4, backoff_s: float = 1.0, cache_dir: Path | None = None):
        if not url or not model:
            raise RerankError("the endpoint reranker needs rerank.url (e.g. http://host:8000/v1) and rerank.model")
        self.url = endpoint_url(url, "/rerank")
        self.model = model
        self.client = JsonClient(self.url, api_key_env, timeout_s, retries, backoff_s, RerankError, RerankUnavailable)
        self.id = f"rerank-endpoint:{self.url}|{model}"
        self.cache = ReplyCache(Path(cache_dir) / "rerank" if cache_dir else None)

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """The endpoint's relevance score for each document, in the documents' order (cached)."""
        key = ReplyCache.key(self.id, query, list(documents), ensure_ascii=False)
        held = self.cache.get(key, lambda v: isinstance(v, list) and len(v) == len(documents))
        if held is not None:
            return np.asarray(held, dtype=np.float64)
        reply = self.client.request({"model": self.model, "query": query, "documents": list(documents),
                                     "top_n": len(documents), "return_documents": False})
        results = reply.get("results") if isinstance(reply, dict) else None
        if not isinstance(results, list):
            raise RerankError(f"{self.url}: expected 'results' in the reply, got {str(reply)[:120]!r}")
        scores = np.full(len(documents), np.nan)
        for item in results:
            index = item.get("index") if isinstance(item, dict) else None
            value = item.get("relevance_score", item.get("score")) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(documents) or not isinstance(value, (int, float)):
                raise RerankError(f"{self.url}: a result of the reply is malformed: {str(item)[:120]!r}")
            scores[index] = float(value)
        if np.isnan(scores).any():
            raise RerankError(f"{self.url}: the reply scored {int((~np.isnan(scores)).sum())} of "
                              f"{len(documents)} documents")
        self.cache.put(key, [float(x) for x in scores])
        return scores


class CrossEncoderReranker:
    """Scores (question, OCR text) pairs with a local sentence-transformers CrossEncoder."""

    def __init__(self, model: str, device: str = "cpu", batch_size: int = 32, cache_dir: Path | None = None):
        if not model:
            raise RerankError("the cross-encoder reranker needs rerank.model: a local folder holding a "
                              "sentence-transformers CrossEncoder (or a hub id where a hub is reachable)")
        from lookalike.retrieval.encoders.colpali import _model_revision

        local = Path(model).exists()
        self.model_path, self.device, self.batch_size = model, device, batch_size
        self.id = f"rerank-cross-encoder:{model}@{_model_revision(Path(model)) if local else 'hub'}"
        self.cache = ReplyCache(Path(cache_dir) / "rerank" if cache_dir else None)
        self._model = None

    def _load(self):
        if self._model is None:
            from sentence_transformers import CrossEncoder

            try:
                self._model = CrossEncoder(self.model_path, device=self.device,
                                           local_files_only=Path(self.model_path).exists())
            except (OSError, ValueError) as exc:
                raise RerankError(f"cannot load a CrossEncoder from {self.model_path!r} ({exc})") from exc
        return self._model

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """The cross-encoder's score for each (query, document) pair, in the documents' order (cached)."""
        key = ReplyCache.key(self.id, query, list(documents), ensure_ascii=False)
        held = self.cache.get(key, lambda v: isinstance(v, list) and len(v) == len(documents))
        if held is not None:
            return np.asarray(held, dtype=np.float64)
        scores = np.asarray(self._load().predict([(query, d) for d in documents], batch_size=self.batch_size,
                                                 show_progress_bar=False), dtype=np.float64).reshape(len(documents))
        self.cache.put(key, [float(x) for x in scores])
        return scores


class MaxSimReranker:
    """MaxSim of the question's multi-vectors against each candidate page's (from the run's encoder)."""

    def __init__(self, encoder_id: str, page_vectors: Mapping[str, np.ndarray], query_vectors: Mapping[str, np.ndarray]):
        self.id = f"rerank-maxsim:{encoder_id}"
        self.pages, self.queries = page_vectors, query_vectors

    def score_ids(self, query_id: str, unit_ids: Sequence[str]) -> np.ndarray:
        """The exact MaxSim of the question's vectors against each unit's; missing vectors are a RerankError naming
        them."""
        from lookalike.retrieval.late_interaction import maxsim

        missing = [u for u in unit_ids if u not in self.pages]
        if query_id not in self.queries or missing:
            raise RerankError(f"maxsim reranker: no vectors for {query_id if query_id not in self.queries else missing[:3]}")
        return maxsim([self.queries[query_id]], [self.pages[u] for u in unit_ids])[0].astype(np.float64)


@dataclass
class RerankResult:
    """A reranked run, each question's scores before and after, and the questions kept in base order with the
    reason."""
    run: pd.DataFrame                                   # query_id, unit_id, score (positions)
    scores: pd.DataFrame                                # query_id, unit_id, base_rank, rerank_score, new_rank
    failed: list = field(default_factory=list)          # (query_id, reason): kept in base order


def rerank_run(base: pd.DataFrame, depth: int, score: Callable[[str, list[str]], np.ndarray]) -> RerankResult:
    """Rerank each question's top depth of base (query_id, unit_id, score) with score(query_id,
    unit_ids) -> scores; below depth the base order stands. A refusal of one question
    (RerankError) keeps its base order and is listed in ``failed``; a server that is down
    (RerankUnavailable) stops the pass."""
    from lookalike.eval import ranking

    rows, detail, failed = [], [], []
    ranked = ranking.rank(base) if len(base) else base.assign(rank=[])    # trec_eval's order: the base ranking
    for qid, group in ranked.groupby("query_id", sort=True):
        units = list(group.sort_values("rank", kind="mergesort")["unit_id"])
        head, tail = units[:depth], units[depth:]
        try:
            s = np.asarray(score(str(qid), head), dtype=np.float64)
            if s.shape != (len(head),) or not np.isfinite(s).all():
                raise RerankError(f"{len(head)} candidates, got scores of shape {s.shape} (or non-finite)")
            order = sorted(range(len(head)), key=lambda i: (-s[i], i))      # ties: the base order
        except RerankUnavailable:
            raise
        except ServiceError as exc:          # a refusal (RerankError among them): this question only
            failed.append((str(qid), str(exc)))
            s, order = np.full(len(head), np.nan), list(range(len(head)))
        new = [head[i] for i in order] + tail
        n = len(new)
        rows.extend((qid, u, float(n - r)) for r, u in enumerate(new))
        detail.extend((qid, head[i], i + 1, s[i], new_rank + 1) for new_rank, i in enumerate(order))
    run = pd.DataFrame(rows, columns=["query_id", "unit_id", "score"])
    scores = pd.DataFrame(detail, columns=["query_id", "unit_id", "base_rank", "rerank_score", "new_rank"])
    return RerankResult(run, scores, failed)


def text_scorer(reranker, questions: Mapping[str, str], texts: Mapping[str, str]) -> Callable:
    """score(query_id, unit_ids) for a text reranker: the question's text against each page's OCR text."""
    def score(query_id: str, unit_ids: list[str]) -> np.ndarray:
        return reranker.score(questions[query_id], [texts.get(u, "") for u in unit_ids])
    return score
