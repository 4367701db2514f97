"""The design's diagnostic settings as systems of their own: ``<base>+rerank`` (retrieval.rerank)
and ``<base>+split`` (retrieval.splitting), built from a run's base rankings where the run's
parameters ask for them (rerank.systems, split.systems). Stage 02 builds them for the questions as
generated, stage 06 for the validated ones, so they are pooled, labelled and tabulated like any
other system. A setting that cannot be built here (no endpoint, no model, a base system that did not
run) is skipped with a note that says why — never approximated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Mapping

import pandas as pd

from lookalike.io.cache import Cache
from lookalike.registry import Registry
from lookalike.retrieval import rerank as R
from lookalike.retrieval import splitting
from lookalike.retrieval import systems
from lookalike.retrieval.encoders import resolve_device

RERANK_SCORE_COLUMNS = ["system", "query_id", "unit_id", "base_rank", "rerank_score", "new_rank"]
SPLIT_COLUMNS = ["system", "query_id", "sub_id", "position", "text"]
FAILED_COLUMNS = ["system", "query_id", "reason"]


@dataclass
class Derived:
    """What stage 07's derived systems gave: their runs, notes in words, reranking scores, sub-queries and the
    questions that failed."""
    runs: dict = field(default_factory=dict)                     # name -> run
    notes: list = field(default_factory=list)                    # what was built or skipped, in words
    rerank_scores: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RERANK_SCORE_COLUMNS))
    splits: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SPLIT_COLUMNS))
    failed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FAILED_COLUMNS))


@dataclass(frozen=True)
class RerankerSpec:
    """A rerank.method: how to build its (score function, reranker id) from the run's typed rerank and
    encode parameters and what the run has encoded; raises RerankError saying what is missing."""

    name: str
    build: Callable
    what: str


RERANKERS: Registry[RerankerSpec] = Registry("rerank.method")


def _endpoint_reranker(rerank, encode, unit_vectors, questions, units, run_dir, cache, settings):
    return _text_reranker(R.EndpointReranker(rerank.url, rerank.model, rerank.api_key_env, cache_dir=cache.root),
                          encode, questions, units, run_dir, cache)


def _cross_encoder_reranker(rerank, encode, unit_vectors, questions, units, run_dir, cache, settings):
    reranker = R.CrossEncoderReranker(rerank.model, resolve_device(settings.get("device", "auto"))[0],
                                      cache_dir=cache.root)
    return _text_reranker(reranker, encode, questions, units, run_dir, cache)


def _text_reranker(reranker, encode, questions, units, run_dir, cache):
    texts = systems.ocr_texts(units, run_dir, cache, encode.ocr_engine, encode.workers,
                               text_source=encode.text_source)
    return R.text_scorer(reranker, dict(zip(questions["query_id"], questions["text"])), texts), reranker.id


def _maxsim_reranker(rerank, encode, unit_vectors, questions, units, run_dir, cache, settings):
    name = rerank.maxsim_encoder
    vecs = unit_vectors.get(name)
    if vecs is None or vecs.kind != "multi":
        raise R.RerankError(f"rerank.maxsim_encoder {name!r} is not a multi-vector system of this run "
                            f"(add it to encode.encoders with its model)")
    qv = systems.encode_queries(questions, [name], run_dir=run_dir, **settings)[name]
    pages = vecs.data.by_id() if vecs.stored else dict(zip(vecs.ids, vecs.data))     # stored: read when asked
    reranker = R.MaxSimReranker(vecs.encoder_id, pages, dict(zip(qv.ids, qv.data)))
    return reranker.score_ids, reranker.id


RERANKERS.register(RerankerSpec("endpoint", _endpoint_reranker,
                                "a /v1/rerank server (Jina, Cohere, vLLM) over each page's OCR text"))
RERANKERS.register(RerankerSpec("cross-encoder", _cross_encoder_reranker,
                                "a local sentence-transformers CrossEncoder over each page's OCR text"))
RERANKERS.register(RerankerSpec("maxsim", _maxsim_reranker,
                                "a multi-vector system of this run re-scoring the base run's pages by MaxSim"))


def _reranker(rerank, encode, unit_vectors: Mapping, questions: pd.DataFrame, units: pd.DataFrame, run_dir: Path,
              cache: Cache, settings: dict):
    """(score function, reranker id) for rerank.method (RERANKERS), or raises RerankError saying what is
    missing. rerank, encode: the run's typed rerank and encode parameters (params.typed)."""
    return RERANKERS[rerank.method].build(rerank, encode, unit_vectors, questions, units, run_dir, cache, settings)


def build(runs: Mapping[str, pd.DataFrame], questions: pd.DataFrame, unit_vectors: Mapping, units: pd.DataFrame,
          run_dir: Path, cache: Cache, rerank, split, encode, settings: dict, depth: int) -> Derived:
    """Every +rerank and +split system the parameters ask for, over these questions. rerank, split,
    encode: the run's typed parameters (params.typed); settings: systems.run_settings (a run_dir in
    it is ignored: run_dir is the one used)."""
    settings = {k: v for k, v in settings.items() if k != "run_dir"}
    out = Derived()
    failed_rows: list = []
    wanted = list(rerank.systems)
    if wanted and len(questions):
        present = [s for s in wanted if s in runs]
        for s in wanted:
            if s not in runs:
                out.notes.append(f"rerank: {s!r} is not a system of this run ({', '.join(sorted(runs))}); "
                                 f"{s}{R.SUFFIX} not built")
        try:
            score, rid = _reranker(rerank, encode, unit_vectors, questions, units, run_dir, cache, settings) if present else (None, "")
        except R.RerankError as exc:
            score = None
            out.notes.append(f"rerank: {', '.join(s + R.SUFFIX for s in present)} not built: {exc}")
        if score is not None:
            frames = []
            for s in present:
                res = R.rerank_run(runs[s], int(rerank.depth), score)
                out.runs[s + R.SUFFIX] = res.run
                frames.append(res.scores.assign(system=s + R.SUFFIX))
                failed_rows += [(s + R.SUFFIX, q, why) for q, why in res.failed]
                out.notes.append(f"rerank: {s}{R.SUFFIX} = the top {rerank.depth} of {s} re-scored by {rid}"
                                 f" ({len(res.failed)} of {questions['query_id'].nunique()} questions kept their "
                                 f"base order: the reranker refused them)")
            out.rerank_scores = pd.concat(frames, ignore_index=True)[RERANK_SCORE_COLUMNS]
    wanted = list(split.systems)
    if wanted and len(questions):
        encoded = [s for s in wanted if s in unit_vectors]
        for s in wanted:
            if s not in unit_vectors:
                out.notes.append(f"split: {s!r} is not an encoded system of this run ({', '.join(sorted(unit_vectors))});"
                                 f" {s}{splitting.SUFFIX} not built")
        splitter = None
        if encoded:
            try:
                splitter = splitting.ChatSplitter(split.url, split.model, split.api_key_env, split.max_subqueries,
                                          cache_dir=cache.root)
            except splitting.SplitError as exc:
                out.notes.append(f"split: {', '.join(s + splitting.SUFFIX for s in encoded)} not built: {exc}")
        if splitter is not None:
            sp = splitting.split_questions(splitter, questions)
            subs = splitting.sub_questions(sp.table)
            frames = []
            for s in encoded:
                qv = systems.encode_queries(subs, [s], run_dir=run_dir, **settings)
                sub_runs = systems.build_runs({s: unit_vectors[s]}, qv, depth)[s]
                out.runs[s + splitting.SUFFIX] = splitting.merge_round_robin(sub_runs, sp.table, depth)
                frames.append(sp.table.assign(system=s + splitting.SUFFIX))
                failed_rows += [(s + splitting.SUFFIX, q, why) for q, why in sp.failed]
            n_sub = sp.table.groupby("query_id").size()
            out.notes.append(f"split: {', '.join(s + splitting.SUFFIX for s in encoded)} = each question decomposed by "
                             f"{splitter.id} into {n_sub.min()}–{n_sub.max()} sub-queries (median {n_sub.median():.0f}),"
                             f" merged round-robin; {len(sp.failed)} questions could not be split and ran as they stand")
            out.splits = pd.concat(frames, ignore_index=True)[SPLIT_COLUMNS]
    out.failed = pd.DataFrame(failed_rows, columns=FAILED_COLUMNS)
    return out
