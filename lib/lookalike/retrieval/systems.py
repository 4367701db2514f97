"""Stage 02's work: encode the corpus and the questions with the configured encoders, build the
built-in systems' runs, and summarise them. Notebooks call these; they hold no loops of their own.

Systems (each a TREC run over the questions):
  ocr-minilm      dense index over OCR-of-pixels MiniLM vectors        (provenance pixels)
  ocr-bm25        BM25 over the same OCR text                          (pixels)
  caption-minilm  dense index over caption-field vectors               (caption-text — the contrast
                  the leak ablation needs, never an "image" system)
  pixels-rrf      reciprocal rank fusion of ocr-minilm and ocr-bm25    (pixels)
  colpali         MaxSim over ColPali-family multi-vectors, when a model is configured (pixels)
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from lookalike.data.schema import resolve_image
from lookalike.eval import metrics
from lookalike.eval import ranking, stats
from lookalike.io.cache import Cache
from lookalike.params import thaw
from lookalike.retrieval import catalog
from lookalike.retrieval import encoders as E
from lookalike.retrieval import fusion
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import runstore
from lookalike.retrieval.encoders import ocr


def encoder_settings(name: str, ocr_engine: str = "", device: str = "auto", batch_size: int = 32, workers: int = 0,
                     colpali_model: str = "", colpali_family: str = "", endpoint: dict | None = None,
                     settings: dict | None = None, encoders: Sequence[str] = (), text_source: str = "auto") -> dict:
    """The keywords the encoder named name (a system name or an encode.encoders entry) is built
    with: device and batch size, its own built-in keys, then encode.settings[<system name>]."""
    out: dict = {"device": device, "batch_size": batch_size}
    given = {"ocr_engine": ocr_engine, "workers": workers, "text_source": text_source, "colpali_model": colpali_model,
             "colpali_family": colpali_family, "endpoint": endpoint or {}}
    spec = E.ENCODERS.get(name)
    for keyword, key in spec.run_keys if spec is not None else ():
        # each built-in declares the run parameters it is built with (EncoderSpec.run_keys)
        section, _, inner = key.partition(".")
        if not inner:
            out[keyword] = given[key]
        elif inner in given[section]:
            out[keyword] = given[section][inner]
    own = (settings or {}).get(E.system_name(name), {})
    if not isinstance(own, dict):
        raise E.EncodeError(f"encode.settings.{E.system_name(name)}: expected a mapping of settings, got {own!r}")
    out.update(own)
    return out


def run_settings(encode) -> dict:
    """Every encoder's settings from the run's encode parameters (params.typed(...).encode), so
    each stage builds its encoders (and their ids, the cache keys) the same way, as the user set them."""
    return dict(ocr_engine=encode.ocr_engine, text_source=encode.text_source, device=encode.device,
                batch_size=encode.batch_size,
                workers=encode.workers, colpali_model=encode.colpali_model, colpali_family=encode.colpali_family,
                endpoint={"url": encode.endpoint_url, "model": encode.endpoint_model,
                          "api_key_env": encode.endpoint_api_key_env, "dimensions": encode.endpoint_dimensions,
                          "image_prompt": encode.endpoint_image_prompt},
                settings=thaw(encode.settings), encoders=list(encode.encoders))


def spec_of(name: str, encoders: Sequence[str] = ()) -> str:
    """The encode.encoders entry behind a system name (a plug-in's import path), else the name."""
    for spec in encoders:
        if E.is_plugin(spec) and E.system_name(spec) == name:
            return spec
    return name


def make_encoder(name: str, **kw) -> E.Encoder:
    """The encoder behind a system name or encode.encoders entry, built with the run's settings
    (kw: run_settings). Its encode.settings are checked against what the encoder declares
    (``EncoderSpec.settings``, a plug-in's constructor): a value of another type is refused naming its
    key, and so is a key a built-in encoder does not take."""
    spec = spec_of(name, kw.get("encoders", ()))
    system = E.system_name(spec)
    declared = E.ENCODERS[spec].declared() if spec in E.ENCODERS else E.declared_settings(E.encoder_class(spec))
    own = (kw.get("settings") or {}).get(system, {})
    unknown = sorted(set(own) - set(declared)) if spec in E.ENCODERS and isinstance(own, dict) else []
    if unknown:        # a built-in encoder would carry a typo into its id and act on nothing: refuse it
        raise E.EncodeError(f"encode.settings.{spec}: {', '.join(map(repr, unknown))} is not a setting of the {spec} "
                            f"encoder; it takes {', '.join(sorted(declared))}")
    built = encoder_settings(spec, **kw)
    for key, value in (own.items() if isinstance(own, dict) else ()):
        if key in declared:
            declared[key].check(value, f"encode.settings.{system}")
    try:
        return E.make_encoder(spec, **built)
    except TypeError as exc:
        raise E.EncodeError(f"encoder {system}: {exc} (check encode.settings.{system})") from exc


def base_systems(run_dir: Path, encoders: Sequence[str]) -> list[str]:
    """The run's encoded retrieval systems, in encode.encoders order: every encoder stage 02 wrote
    vectors for, except appearance (it has no text side, so it answers no query)."""
    names = [E.system_name(n) for n in encoders]
    return [n for n in names if E.answers_queries(n) and (Path(run_dir) / "vectors" / f"{n}.npz").is_file()]


def pixel_systems(run_dir: Path, encoders: Sequence[str]) -> list[str]:
    """The run's encoded systems that read pixels only (the ones hard negatives and top-1 tables are
    about): ocr-minilm and ocr-bm25, and colpali, clip, bi, endpoint or a plug-in when they ran."""
    out = []
    for name in base_systems(run_dir, encoders):
        cls = E.encoder_class(spec_of(name, encoders))
        if cls.provenance == "pixels":
            out.append(name)
    return out


class Encoded(NamedTuple):
    """What encode_units returns: each system's vectors, a row per encoder (id, kind, text source,
    device, shape, cache hits, seconds), and the Ray engine's per-stage summary (None on the local engine)."""

    vectors: dict
    table: pd.DataFrame
    engine: pd.DataFrame | None


def encode_units(units: pd.DataFrame, base_dir: Path, names: Sequence[str], cache: Cache, engine: str = "local",
                 ray_address: str = "", ray_object_store_mb: int = 512,
                 store_root: Path | None = None, **kw) -> Encoded:
    """Encode every unit with each named encoder (encode.encoders entries). Each output is checked
    (``encoders.checked``). engine "ray": the pages are first encoded on Ray into the cache
    (retrieval.engine.prefill, whose per-stage summary comes back as Encoded.engine), then read back here
    as on a warm cache.
    store_root: multi-vector pages go to a float16 PageStore at store_root/<system>.pages and are
    read from it lazily (retrieval.store) — streamed there page by page by an encoder that can
    (its encode_units takes store_dir), else written there from what it returned."""
    out, rows = {}, []
    summary = None
    seen: dict[str, str] = {}
    for spec in names:
        name = E.system_name(spec)
        if name in seen:
            raise E.EncodeError(f"encode.encoders: {spec!r} and {seen[name]!r} both give the system {name!r}")
        seen[name] = spec
    if engine == "ray":
        from lookalike.retrieval import engine as engines

        summary = engines.prefill(units, base_dir, names, cache, kw, make_encoder, address=ray_address,
                                  workers=kw.get("workers", 0), object_store_mb=ray_object_store_mb)
    elif engine != "local":
        raise E.EncodeError(f"encode.engine: {engine!r} is not one of local, ray")
    for spec in names:
        name = E.system_name(spec)
        enc = make_encoder(spec, **kw)
        before = cache.stats()
        t0 = time.perf_counter()
        store_dir = Path(store_root) / f"{name}.pages" if store_root is not None and enc.kind == "multi" else None
        if store_dir is not None:
            shutil.rmtree(store_dir, ignore_errors=True)   # an earlier run's pages and centroids go with it
        if store_dir is not None and getattr(enc, "streams_to_store", False):
            got = enc.encode_units(units, base_dir, cache, store_dir=store_dir)
        else:
            got = enc.encode_units(units, base_dir, cache)
        vecs = E.checked(got, list(units["unit_id"]), f"encoder {name}", E.encoder_class(spec).provenance)
        if store_dir is not None and vecs.kind == "multi" and not vecs.stored:
            from lookalike.retrieval.store import PageStore

            stored = PageStore.write(store_dir, vecs.ids, vecs.data, vecs.dim, vecs.encoder_id)
            vecs = E.Vectors(vecs.encoder_id, vecs.provenance, vecs.ids, stored.pages(), vecs.kind, vecs.stats)
        seconds = time.perf_counter() - t0
        after = cache.stats()
        out[name] = vecs
        read = vecs.stats.get("sources") or {}
        rows.append(dict(encoder=name, encoder_id=vecs.encoder_id, provenance=vecs.provenance, kind=vecs.kind,
                         text=text_source_words(read) if read else "",
                         device=enc.device, shape=vecs.describe(), units=len(vecs),
                         cache_hits=after["hits"] - before["hits"], cache_misses=after["misses"] - before["misses"],
                         seconds=round(seconds, 2), units_per_s=round(len(vecs) / seconds, 1) if seconds > 0 else float("inf")))
    return Encoded(out, pd.DataFrame(rows), summary)


def text_sources(units: pd.DataFrame, base_dir: Path, text_source: str = "auto", engine: str = "") -> list[str]:
    """Where each unit's page text comes from under encode.text_source: 'text-layer' (the PDF page's own
    text, kept beside its render by stage 01), 'ocr:<engine>' or 'none'."""
    from lookalike.io.text_layer import read_refusal

    paths = [str(resolve_image(p, base_dir)) for p in units["image_path"]]
    engine = engine or ocr.default_engine()
    out = []
    for path, layer in zip(paths, ocr.text_layers(paths, text_source)):
        label = ocr.source_label(engine, text_source, layer is not None)
        refused = read_refusal(path) if layer is None and text_source != "ocr" else ""
        # a page whose text layer was not trusted says why (io.text_layer's rules)
        out.append(f"{label} (text layer refused: {refused})" if refused else label)
    return out


def text_source_words(sources: Sequence[str] | Mapping[str, int]) -> str:
    """'512 pages from the PDF text layer, 24 by OCR (tesseract)', from each page's source or from
    the counts per source (ocr_many's stats['sources'])."""
    if not isinstance(sources, Mapping):
        refused = sum(" (text layer refused: " in str(s) for s in sources)
        sources = [str(s).split(" (text layer refused: ")[0] for s in sources]
    else:
        refused = 0
    counts = (pd.Series(dict(sources), dtype="int64") if isinstance(sources, Mapping)
              else pd.Series(list(sources), dtype=object).value_counts())
    parts = []
    for src, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        what = ("from the PDF text layer" if src == "text-layer" else "with no text (no usable text layer)"
                if src == "none" else f"by OCR ({src.split(':', 1)[1]})")
        parts.append(f"{n} {'page' if n == 1 else 'pages'} {what}")
    return (", ".join(parts) or "no pages") + (
        f" ({refused} of them because their text layer was refused: hidden, scrambled or too sparse — "
        "units.csv's text_source says which)" if refused else "")


def ocr_texts(units: pd.DataFrame, base_dir: Path, cache: Cache, engine: str = "", workers: int = 0,
              run_store: bool = True, text_source: str = "auto") -> dict[str, str]:
    """Page text per unit id — what text judges see: the PDF text layer where encode.text_source
    takes it, else OCR. From the run's store (retrieval.runstore) when an earlier stage of this run
    already asked; else from the OCR cache (stage 02 read the pages), and then kept in the store for
    the stages after."""
    paths = [resolve_image(p, base_dir) for p in units["image_path"]]

    def compute() -> dict[str, str]:
        texts, _ = ocr.ocr_many([str(p) for p in paths], engine or None, cache, workers, progress=True,
                                text_source=text_source)
        return dict(zip(units["unit_id"], texts))

    if not run_store:
        return compute()
    key = ocr.engine_id(engine or ocr.default_engine()) + ("" if text_source == "ocr" else f"|text:{text_source}")
    return runstore.page_texts(base_dir, key, list(units["unit_id"]), paths, compute)


def encode_queries(questions: pd.DataFrame, names: Sequence[str], run_dir: Path | None = None, **kw) -> dict:
    """Query vectors for each encoder that has a text side (appearance has none). With run_dir, a
    question already encoded by an earlier stage of the run is read from the run's store
    (retrieval.runstore), so every stage sees the same vector and none encodes it twice."""
    out = {}
    texts, ids = list(questions["text"]), list(questions["query_id"])
    for spec in names:
        name = E.system_name(spec)
        if not E.answers_queries(spec):
            continue
        enc = make_encoder(spec, **kw)

        def encode(t, i, enc=enc, name=name):
            return E.checked(enc.encode_queries(t, i), list(i), f"encoder {name} (queries)")

        if run_dir is None or enc.kind == "text":
            out[name] = encode(texts, ids)
        else:
            out[name], _ = runstore.query_vectors(run_dir, name, enc.id, ids, texts, encode)
    return out


class Searched(NamedTuple):
    """What search_systems returns: each system's ranking, and for each multi-vector system searched by
    candidates its candidate recall against exact MaxSim (retrieval.indexes; empty otherwise)."""

    runs: dict[str, pd.DataFrame]
    candidate_recall: dict[str, dict]


def build_runs(unit_vectors: dict, query_vectors: dict, depth: int = 100, rrf_k: int = 60,
               memory_budget_mb: float = 512.0, search: str = "exact", n_candidates: int = 200, clusters: int = 64,
               stage: str = "02") -> dict[str, pd.DataFrame]:
    """Each system's ranking (search_systems without the candidate recall)."""
    return search_systems(unit_vectors, query_vectors, depth, rrf_k, memory_budget_mb, search, n_candidates, clusters,
                          stage=stage, recall_sample=0).runs


def search_systems(unit_vectors: dict, query_vectors: dict, depth: int = 100, rrf_k: int = 60,
                   memory_budget_mb: float = 512.0, search: str = "exact", n_candidates: int = 200, clusters: int = 64,
                   recall_sample: int = 100, seed: int = 0, stage: str = "02") -> Searched:
    """Index each encoder's unit vectors and search the queries, then fuse them as the stage's plan says
    (retrieval.catalog) (multi-vector ones exactly, or by candidates: then each such system's candidate
    recall against exact MaxSim on recall_sample queries comes back too; recall_sample 0 skips it).
    What an index accepts comes from
    the system's *declared* provenance (its encoder class), never from the vectors it is handed, so
    caption vectors handed to a pixel system are refused (retrieval.indexes.ProvenanceError)."""
    runs: dict[str, pd.DataFrame] = {}
    recall: dict[str, dict] = {}
    for name, vecs in unit_vectors.items():
        if name not in query_vectors:
            continue
        accepts = (declared_provenance(name, vecs),)
        if vecs.kind == "text":
            index = retrieve.BM25Index(accepts=accepts, name=name)
        elif vecs.kind == "multi":
            index = retrieve.MultiVectorIndex(accepts=accepts, name=name, memory_budget_mb=memory_budget_mb,
                                              search=search, n_candidates=n_candidates, clusters=clusters)
        else:
            index = retrieve.DenseIndex(accepts=accepts, name=name)
        runs[name] = index.add(vecs).search(query_vectors[name], k=depth)
        if recall_sample and vecs.kind == "multi" and search == "candidates":
            # an approximate search is reported with its candidate recall against exact MaxSim
            recall[name] = index.candidate_recall(query_vectors[name], recall_sample, seed)
    # the fusions this stage builds (retrieval.catalog: stage 02 fuses pixels-rrf, stage 06 on also hybrid-rrf)
    base = [n for n in unit_vectors if n in runs]
    fusions = catalog.plan(base, {n: declared_provenance(n, unit_vectors[n]) for n in base}, stage).fusions()
    for name, members in fusions.items():
        runs[name] = fusion.fuse(catalog.SYSTEMS[name].how, [runs[m] for m in members], rrf_k=rrf_k, depth=depth)
    return Searched(runs, recall)


def declared_provenance(name: str, vecs=None) -> str:
    """What the system named name declares it reads: its encoder class's provenance (pixels,
    caption-text); a plug-in declares through its vectors, which ``encode_units`` checked against
    its class's declaration."""
    cls = E.ENCODERS.get(name)
    return cls.provenance if cls is not None else (vecs.provenance if vecs is not None else "pixels")


def evidence_qrels(questions: pd.DataFrame) -> pd.DataFrame:
    """Qrels from the questions' evidence units (relevance 1 each): the generator's gold, nothing more."""
    rows = [(q, u, 1) for q, ids in zip(questions["query_id"], questions["evidence_unit_ids"])
            for u in str(ids).split(";") if u]
    return pd.DataFrame(rows, columns=["query_id", "unit_id", "relevance"])


def write_runs(runs: dict[str, pd.DataFrame], run_dir: Path, folder: str = "runs") -> list[Path]:
    """Each system's ranking as TREC run_dir/<folder>/<system>.run, after removing every run file an
    earlier run left there: the folder belongs to the stage that writes it, and a system this run does
    not have (an encoder or a +rerank taken out of the params) must not be read as one of its systems.
    A stage that writes more runs to the same folder later in its save adds them after this call."""
    out = Path(run_dir) / folder
    out.mkdir(parents=True, exist_ok=True)
    for old in sorted(out.glob("*.run")):
        old.unlink()
    return [ranking.write_run(run, out / f"{name}.run", tag=name) for name, run in sorted(runs.items())]


def first_look(runs: dict[str, pd.DataFrame], qrels: pd.DataFrame, provenance: dict[str, str],
               measures=("recall_10", "ndcg_cut_10", "recall_all_10"), seed: int = 0,
               clusters: pd.Series | None = None) -> pd.DataFrame:
    """Per system: each measure's mean over the questions with a bootstrap 95% CI (n = questions;
    the questions' clusters resampled when given; every system draws the same resamples), and ties_10:
    the questions whose Recall@10 the order of tied scores decides (ranking.tie_settled)."""
    if not runs or qrels.empty:
        return pd.DataFrame(columns=["system", "provenance", "n"])
    relevant = qrels[qrels["relevance"] > 0].groupby("query_id")["unit_id"].agg(set).to_dict()
    rows = []
    for name, run in sorted(runs.items()):
        ev = metrics.evaluate(qrels, run, list(measures), complete=True)
        row = {"system": name, "provenance": provenance.get(name, "pixels"), "n": len(ev.per_query),
               "ties_10": ranking.tie_settled(run[run["query_id"].isin(ev.per_query.index)], relevant, 10),
               "interval": stats.interval_words(clusters)}
        cl = stats.cluster_array(clusters, list(ev.per_query.index))
        for j, m in enumerate(measures):
            ci = stats.bootstrap_ci(ev.per_query[m].to_numpy(), 2000, rng=np.random.default_rng([seed, j]), clusters=cl)
            row.update({m: ci.estimate, f"{m}_lo": ci.lo, f"{m}_hi": ci.hi})
        rows.append(row)
    return pd.DataFrame(rows)


def with_chance(look: pd.DataFrame, candidates: int, k: int = 10) -> pd.DataFrame:
    """The first look with what chance scores beside it: a random ranking of the candidates holds each
    evidence unit in its top k with probability k/N, so its expected Recall@k is k/N (N the units, or
    the documents when judgements are per document). vs_chance says, per system, whether its 95% CI
    of Recall@k lies above that or holds it (then it is indistinguishable from chance)."""
    out = look.copy()
    if not len(out) or f"recall_{k}" not in out.columns or candidates < 1:
        return out
    chance = min(k, candidates) / candidates
    out[f"chance_recall_{k}"] = chance
    out["vs_chance"] = ["indistinguishable from chance" if lo <= chance else "above chance"
                        for lo in out[f"recall_{k}_lo"]]
    return out


def score_matrix(unit_vectors, query_vectors) -> np.ndarray:
    """Every query's score for every unit: (n_queries, n_units), float32 — dot products for single
    vectors, BM25 for texts, MaxSim for multi-vectors."""
    return scorer(unit_vectors)(query_vectors)


def score_rows(unit_vectors, query_vectors, positions: Sequence[int] | None = None):
    """A function of positions that scores those queries (of positions, when given: the queries'
    rows taken from query_vectors) against every unit — for scoring a block of queries at a time
    (negatives.top1_outcomes) instead of holding the whole query x unit matrix."""
    score = scorer(unit_vectors)
    rows_of = list(range(len(query_vectors))) if positions is None else list(positions)
    return lambda rows: score(query_vectors.take([rows_of[i] for i in rows]))


def scorer(unit_vectors):
    """score_matrix against these units as a function of the query vectors, the units' side (a BM25
    index, the unit matrix) prepared once — so blocks of queries can be scored one at a time."""
    if unit_vectors.kind == "text":
        return retrieve.BM25Index(accepts=(unit_vectors.provenance,)).add(unit_vectors).scores
    if unit_vectors.kind == "multi":
        return lambda query_vectors: retrieve.maxsim(query_vectors.data, unit_vectors.data)
    units = np.asarray(unit_vectors.data, dtype=np.float32)
    return lambda query_vectors: np.asarray(query_vectors.data, dtype=np.float32) @ units.T
