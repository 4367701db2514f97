"""The leak ablation over encoded vectors: the image / caption / both indexes searched with both query sets,
the blind pooled judging of their results, the pixel systems' runs, the planted and injected leaks and the
metadata probe (lookalike.analysis.leakage says what the ablation is for)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from lookalike.data.schema import CAPTION_COLUMNS, filename_words
from lookalike.eval import metrics
from lookalike.eval import stats
from lookalike.io.cache import Cache
from lookalike.io.labels import read_filled_sheet
from lookalike.retrieval import encoders
from lookalike.retrieval import fusion
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import systems
from lookalike.judging import pool as judge_pool
from lookalike.retrieval.encoders.base import Vectors
from lookalike.vocab import LABEL_GRADES
from lookalike.analysis.leak_queries import INDEXES, QUERY_SETS, build_query_sets, read_blind_queries


# ----------------------------------------------------------------------------- indexes

def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


@dataclass
class AblationIndexes:
    """The leak ablation's three indexes over the same units: image only, caption only, and both; injected when the
    image index was built with a planted leak (fault injection)."""
    image: retrieve.DenseIndex
    caption: retrieve.DenseIndex
    both: retrieve.DenseIndex
    injected: bool


def build_indexes(image_vectors: Vectors, caption_vectors: Vectors, injected: bool = False) -> AblationIndexes:
    """The three indexes over the same units.

    injected: the image vectors carry a fault injection on purpose (``inject_leak``: metadata text
    appended to what the image path reads). The pixels-only guard of the image index refuses such
    vectors, so the injection bypasses it explicitly (allow_foreign_provenance) — never silently.
    """
    image = retrieve.DenseIndex(accepts=("pixels",), name="image", allow_foreign_provenance=injected)
    image.add(image_vectors)
    caption = retrieve.DenseIndex(accepts=("caption-text",), name="caption").add(caption_vectors)
    both_data = _normalise(_normalise(image_vectors.data) + _normalise(caption_vectors.data)).astype(np.float32)
    both_vecs = Vectors(f"sum({image_vectors.encoder_id},{caption_vectors.encoder_id})", "pixels+caption-text",
                        list(image_vectors.ids), both_data)
    both = retrieve.DenseIndex(accepts=("pixels+caption-text",), name="both").add(both_vecs)
    return AblationIndexes(image, caption, both, injected)


def search_all(indexes: AblationIndexes, query_vectors: Vectors, depth: int = 100) -> dict[str, pd.DataFrame]:
    """index name -> run over every query (both sets); the query encoder is the shared text model."""
    return {name: getattr(indexes, name).search(query_vectors, k=depth) for name in INDEXES}


def qrels_for(queries: pd.DataFrame) -> pd.DataFrame:
    """The target unit of each query is its relevant unit (grade 2, the 'satisfies the query' grade)."""
    return pd.DataFrame({"query_id": queries["query_id"], "unit_id": queries["unit_id"], "relevance": 2})


def ablation_table(runs: dict[str, pd.DataFrame], queries: pd.DataFrame, qrels: pd.DataFrame, seed: int,
                   n_boot: int = 2000, level: int = 2, clusters: pd.Series | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, per_query): recall@10 and nDCG@10 with bootstrap 95% CIs per index × query set
    (clusters: query_id -> cluster of its target unit, resampled whole; every index draws the same
    resamples)."""
    rows, per_query = [], []
    for index in INDEXES:
        ev = metrics.evaluate(qrels, runs[index], ["recall_10", "ndcg_cut_10"], level=level, complete=True)
        pq = ev.per_query.join(queries.set_index("query_id")[["query_set", "unit_id", "register", "content_type"]])
        pq.insert(0, "index", index)
        per_query.append(pq.reset_index())
        for j, qs in enumerate(QUERY_SETS):
            part = pq[pq["query_set"] == qs]
            row = {"index": index, "query_set": qs, "n": len(part), "interval": stats.interval_words(clusters)}
            cl = stats.cluster_array(clusters, list(part.index))
            for k, m in enumerate(["recall_10", "ndcg_cut_10"]):
                ci = stats.bootstrap_ci(part[m].to_numpy(), n_boot, rng=np.random.default_rng([seed, j, k]), clusters=cl)
                row.update({m: ci.estimate, f"{m}_lo": ci.lo, f"{m}_hi": ci.hi})
            rows.append(row)
    return pd.DataFrame(rows), pd.concat(per_query, ignore_index=True)


def ratios(table: pd.DataFrame, chance: float = 0.0) -> pd.DataFrame:
    """Caption-derived / blind recall@10 per index (>1: the index favours caption-shaped queries).
    chance: a random ranking's recall@10 (10 / units). A ratio of two figures that are not both above
    chance (their 95% CIs clear of it) measures noise, so it is left out and ``note`` says why."""
    wide = table.pivot(index="index", columns="query_set", values="recall_10").reindex(list(INDEXES))
    lo = table.pivot(index="index", columns="query_set", values="recall_10_lo").reindex(list(INDEXES))
    at_chance = ((lo["blind"] <= chance) | (lo["caption-derived"] <= chance)).to_numpy()
    ratio = (wide["caption-derived"] / wide["blind"].replace(0, np.nan)).to_numpy()
    return pd.DataFrame({"index": wide.index, "blind": wide["blind"].to_numpy(),
                         "caption_derived": wide["caption-derived"].to_numpy(),
                         "ratio": np.where(at_chance, np.nan, ratio),
                         "difference": (wide["caption-derived"] - wide["blind"]).to_numpy(),
                         "note": np.where(at_chance, f"no ratio: a figure's 95% CI reaches chance ({chance:.3f})", "")})


def breakdown(per_query: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean recall@10 per index × query set × value of `by` (register or content_type), with n."""
    g = per_query.groupby(["index", "query_set", by], sort=True)["recall_10"]
    return g.agg(["mean", "size"]).rename(columns={"mean": "recall_10", "size": "n"}).reset_index()


def resolution(n: int, p: float = 0.5) -> float:
    """The analytic SE of a proportion at p and the smallest difference n queries resolve (1.96 · √2 · SE)."""
    se = stats.proportion_se(p, n)
    return stats.Z95 * np.sqrt(2) * se


# ----------------------------------------------------------------------------- blind pooled judging

def sheet(runs: dict[str, pd.DataFrame], queries: pd.DataFrame, k: int = 10, seed: int = 0,
          judged: pd.DataFrame | None = None) -> pd.DataFrame:
    """The judging sheet: the judge pool (every system's top k per query), shuffled into opaque items.

    It carries what a blind judge may see — the query text and the unit's image — and an opaque
    item id; never the system, the rank, the file name or the caption. With ``judged`` (query_id,
    unit_id of judgements already made) only the new pairs are returned (re-pooling).
    """
    pooled = judge_pool.unjudged(judge_pool.pool(runs, queries["query_id"], k), judged)
    return judge_pool.blind_sheet(pooled, queries, seed)


def reference_labels(sheet: pd.DataFrame, queries: pd.DataFrame, units: pd.DataFrame) -> pd.DataFrame:
    """The demo's answer key as a judge, in the project's labels: sufficient — the query's target
    unit; supporting — a near miss (same template, metric and entity, another period or revision);
    irrelevant otherwise. Columns item, query_id, unit_id, label, grade (LABEL_GRADES), judge='reference'."""
    target = queries.set_index("query_id")["unit_id"]
    meta = units.set_index("unit_id")[["template_id", "metric", "entity"]]
    labels = []
    for q, u in zip(sheet["query_id"], sheet["unit_id"]):
        t = target[q]
        if u == t:
            labels.append("sufficient")
        elif tuple(meta.loc[u]) == tuple(meta.loc[t]) and meta.loc[u, "metric"]:
            labels.append("supporting")
        else:
            labels.append("irrelevant")
    return _judgements(sheet["item"], sheet["query_id"], sheet["unit_id"], labels, ["reference"] * len(sheet))


def _judgements(items, query_ids, unit_ids, labels, judges) -> pd.DataFrame:
    labels = list(labels)
    return pd.DataFrame({"item": list(items), "query_id": list(query_ids), "unit_id": list(unit_ids), "label": labels,
                         "grade": [LABEL_GRADES[x] for x in labels], "judge": list(judges)},
                        columns=JUDGEMENT_COLUMNS)


JUDGEMENT_COLUMNS = ["item", "query_id", "unit_id", "label", "grade", "judge"]


def qrels_from_judgements(judgements: pd.DataFrame) -> pd.DataFrame:
    """query_id, unit_id, relevance (the label's grade)."""
    return pd.DataFrame({"query_id": judgements["query_id"], "unit_id": judgements["unit_id"],
                         "relevance": judgements["label"].map(LABEL_GRADES).astype(int)})


def import_judgements(path: Path | str, sheet: pd.DataFrame) -> pd.DataFrame:
    """Read a filled judging sheet (CSV with item and label columns) and map items back to pairs.

    label is one of sufficient, supporting, irrelevant (a sheet from before the labels, with a grade
    column of 2 / 1 / 0, is read through the same grades). Empty cells are not judged yet. Errors
    name the file and row: an unknown item, or a label that is not one of the three.
    """
    read = read_filled_sheet(path, sheet["item"])
    query_of, unit_of = dict(zip(sheet["item"], sheet["query_id"])), dict(zip(sheet["item"], sheet["unit_id"]))
    return _judgements(read["item"], read["item"].map(query_of), read["item"].map(unit_of), read["label"],
                       read["judge"])


def judged_at_k(runs: dict[str, pd.DataFrame], judgements: pd.DataFrame, k: int = 10) -> pd.DataFrame:
    """judged_k per system over every query it ranked (the Judged@k measure of eval.measures: the
    share of the top min(k, retrieved) carrying a judgement). A query the run ranked that holds no
    judgement at all counts 0 — exactly what an unfair pool looks like — where trec_eval would skip it."""
    qrels = qrels_from_judgements(judgements)
    rows = []
    for name, run in sorted(runs.items()):
        queries = sorted(set(run["query_id"]))
        values = (metrics.evaluate(qrels, run, [f"judged_{k}"]).per_query[f"judged_{k}"] if len(qrels) and queries
                  else pd.Series(dtype=float))
        per_query = values.reindex(queries, fill_value=0.0)
        rows.append({"system": name, f"judged_{k}": float(per_query.mean()) if len(per_query) else 0.0,
                     "n": int(len(per_query))})
    return pd.DataFrame(rows, columns=["system", f"judged_{k}", "n"])


# ----------------------------------------------------------------------------- the whole ablation

@dataclass
class Ablation:
    """One leak ablation's result: the queries it ran, each index's run, the recall table with intervals, the
    per-query figures the intervals resample, and what was planted or dropped."""
    queries: pd.DataFrame
    runs: dict
    table: pd.DataFrame
    per_query: pd.DataFrame
    injected: str                     # "" (clean), or the field injected into the image path
    clusters: pd.Series | None = None  # query_id -> the cluster its intervals resample
    dropped: pd.DataFrame | None = None  # your blind queries that could not be used, with the reason
    pixel_pq: pd.DataFrame | None = None  # recall@10 per pixel system (PIXEL_SYSTEMS) and query, for the gate
    probe: dict | None = None         # pixel system -> (units whose input changed with shuffled metadata, units)
    # the same ablation for every dual encoder of the run (one model for pixels, caption text and
    # queries: clip, bi, endpoint, a plug-in with encode_captions), one block of rows per system
    systems_table: pd.DataFrame | None = None
    systems_per_query: pd.DataFrame | None = None
    systems_skipped: list = field(default_factory=list)   # (system, why) for duals the ablation cannot index
    not_evaluated: str = ""           # why the retrieval half has no queries ("" when it has them)


# a query set in which a text stands for more than one target is degenerate: at most this share of
# its queries may repeat another's text (a repeated query cannot single out its unit in any index)
MAX_REPEATED_SHARE = 0.1


def degenerate_queries(queries: pd.DataFrame) -> str:
    """Why a query set cannot test the image path ("" when it can): per set, too few distinct texts.
    Template-filled text on a corpus without the fields it fills ("Which page shows page for ,?") is
    the case this catches: hundreds of queries, three strings, and a gate that passes on them."""
    out = []
    for name, part in queries.groupby("query_set", sort=True):
        texts = part["text"].astype(str).str.strip().str.lower()
        distinct = texts.nunique()
        if len(part) and (len(part) - distinct) > MAX_REPEATED_SHARE * len(part):
            out.append(f"the {name} queries are degenerate: {len(part)} queries, {distinct} distinct texts")
    return "; ".join(out)


# Fault injections. caption-index: the classic bug — the image path encodes the caption fields
# instead of the pixels. The others are partial: the text a leaky pipeline appends to what the
# image path reads (the descendants of the caption the design warns about), each naming the units
# column it takes the text from.
INJECTIONS = {"caption-index": "", "caption": "caption", "filename": "filename", "alt-text": "alt_text"}


def injected_text(units: pd.DataFrame, inject: str) -> list[str]:
    # (caption-index replaces the vectors instead; it has no text to append)
    """The metadata a leaky image path would read for each unit: its caption, its alt text, or its
    file name with separators as spaces and without the extension ('cs_2024q1_deck_p01.png' ->
    'cs 2024q1 deck p01')."""
    if inject not in INJECTIONS or not INJECTIONS[inject]:
        raise ValueError(f"unknown leak injection {inject!r}; expected one of {', '.join(INJECTIONS)}")
    values = units[INJECTIONS[inject]].fillna("").astype(str)
    if inject == "filename":
        values = values.map(filename_words)
    return list(values)


def inject_leak(image_vectors: Vectors, units: pd.DataFrame, texts: Mapping[str, str], inject: str,
                device: str = "cpu", cache: Cache | None = None) -> Vectors:
    """The image path's vectors as a leaky pipeline makes them: the page's OCR text with the unit's
    metadata (INJECTIONS) appended, through the same text model. Provenance says what went in.
    With a cache, each joined text's vector is kept (by the text's hash), so a re-run embeds none."""
    from lookalike.retrieval.encoders import text as text_model

    extra = dict(zip(units["unit_id"], injected_text(units, inject)))
    joined = [f"{texts.get(u, '')} {extra.get(u, '')}".strip() for u in image_vectors.ids]
    device = device if device != "auto" else "cpu"
    data = (text_model.embed_cached(joined, cache, f"minilm-{text_model.model_revision()}|joined-text|{device}",
                                    device) if cache is not None else text_model.embed(joined, device))
    return Vectors(f"{image_vectors.encoder_id}+{inject}", f"pixels+{inject}", list(image_vectors.ids), data)


def run_ablation(units: pd.DataFrame, base_dir: Path, seed: int, cache: Cache | None = None, max_units: int | None = None,
                 inject: str = "", ocr_engine: str = "", workers: int = 0, device: str = "auto",
                 depth: int = 100, text_source: str = "auto", n_boot: int = 2000, blind_queries: str = "", page_base: int = 1,
                 cluster: str = "document", visible: pd.DataFrame | None = None,
                 facts: pd.DataFrame | None = None, duals: Mapping[str, object] | None = None) -> Ablation:
    """Encode, index, query and score the ablation on units (all of them, or a seeded subset).
    inject: '' for a clean run, or one of INJECTIONS (the gate must then fail). cluster: what the
    intervals resample (stats.query_clusters of each query's target unit). duals: system name ->
    encoder with encode_captions; each gets its own image / caption / both indexes (``dual_ablation``),
    and its image index joins the gate's pixel systems (clean runs and the caption-index injection;
    the partial injections append text for the built-in text model only)."""
    cache = cache or Cache()
    # one canonical order, whoever read the corpus: queries, the sample and ties in the rankings then do
    # not depend on the order units arrived in, so stage 03 and leak-check print one difference and
    # one interval for the same units
    units = units.sort_values("unit_id", kind="mergesort").reset_index(drop=True)
    if facts is not None and len(facts):
        facts = facts.sort_values(list(facts.columns), kind="mergesort", key=lambda c: c.astype(str)).reset_index(drop=True)
    if visible is not None and len(visible):
        visible = visible.sort_values(list(visible.columns), kind="mergesort",
                                      key=lambda c: c.astype(str)).reset_index(drop=True)
    if max_units is not None and len(units) > max_units:
        rng = np.random.default_rng([seed, 60])
        units = units.iloc[np.sort(rng.choice(len(units), size=max_units, replace=False))].reset_index(drop=True)
    image_enc = encoders.make_encoder("ocr-minilm", ocr_engine=ocr_engine, workers=workers, device=device, progress=False,
                               text_source=text_source)
    caption_enc = encoders.make_encoder("caption-minilm", device=device, progress=False)
    caption_vectors = caption_enc.encode_units(units, base_dir, cache)

    def image_path(us: pd.DataFrame) -> Vectors:
        """What the image index holds for these units: the pixels-only vectors, or the injected fault."""
        if inject == "caption-index":
            return caption_enc.encode_units(us, base_dir, cache)
        vectors = image_enc.encode_units(us, base_dir, cache)
        if inject:
            texts = systems.ocr_texts(us, base_dir, cache, ocr_engine, workers, text_source=text_source)
            vectors = inject_leak(vectors, us, texts, inject, image_enc.device, cache)
        return vectors

    def bm25_path(us: pd.DataFrame) -> Vectors:
        return bm25_texts(us, base_dir, cache, inject, ocr_engine, workers, text_source)

    image_vectors = image_path(units)
    probe = metadata_probe({"image": image_path, "ocr-bm25": bm25_path}, units, seed)
    dropped = pd.DataFrame(columns=["source", "row", "unit_id", "problem"])
    why_not = ""
    if blind_queries:
        queries, dropped = read_blind_queries(blind_queries, units, seed, page_base)
        queries = queries[queries["unit_id"].isin(set(units["unit_id"]))].reset_index(drop=True)
    elif visible is None or not len(visible):
        # a blind query says what the page shows, written without its caption: only the demo's
        # generator knows that; on any other corpus someone has to write them (leak.blind_queries)
        queries = build_query_sets(units.iloc[:0], seed)
        why_not = ("no blind queries: off the built-in demo they come from your leak.blind_queries file (what "
                   "each unit shows, written by someone who has not read its caption); none was given")
    else:
        queries = build_query_sets(units, seed, visible=visible, facts=facts)
    if not why_not:
        why_not = degenerate_queries(queries)
        if why_not:
            queries = queries.iloc[:0]
    indexes = build_indexes(image_vectors, caption_vectors, bool(inject))
    query_vectors = caption_enc.encode_queries(list(queries["text"]), list(queries["query_id"]), cache)
    runs = search_all(indexes, query_vectors, depth)
    clusters = stats.query_clusters(dict(zip(queries["query_id"], queries["unit_id"])), units, cluster)
    table, per_query = ablation_table(runs, queries, qrels_for(queries), seed, n_boot, clusters=clusters)
    pixel_runs = pixel_system_runs(units, base_dir, cache, queries, runs["image"], inject, ocr_engine, workers, depth,
                                   text_source)
    sys_tables, sys_pq, skipped = [], [], []
    for name, enc in (duals or {}).items() if inject in ("", "caption-index") else ():
        if enc.kind != "single":
            skipped.append((name, f"a {enc.kind}-vector encoder: the 'both' index (a sum of normalised image and "
                                  "caption vectors) is defined for single vectors only"))
            continue
        dual = dual_ablation(enc, name, units, base_dir, cache, queries, inject, depth)
        t, pq = ablation_table(dual, queries, qrels_for(queries), seed, n_boot, clusters=clusters)
        sys_tables.append(t.assign(system=name))
        sys_pq.append(pq.assign(system=name))
        pixel_runs[name] = dual["image"]
        probe.update(metadata_probe({name: lambda us, enc=enc: _dual_image(enc, us, base_dir, cache, inject)},
                                    units, seed))
    systems_table = (pd.concat(sys_tables, ignore_index=True)[["system"] + list(table.columns)] if sys_tables
                     else pd.DataFrame(columns=["system"] + list(table.columns)))
    systems_pq = pd.concat(sys_pq, ignore_index=True) if sys_pq else None
    return Ablation(queries, runs, table, per_query, inject, clusters, dropped,
                    pixel_per_query(pixel_runs, queries), probe, systems_table, systems_pq, skipped, why_not)


def _dual_image(enc, units: pd.DataFrame, base_dir: Path, cache: Cache, inject: str = "") -> Vectors:
    """What a dual encoder's image index holds: its page vectors, or, under the caption-index
    injection, its embedding of the caption fields (the classic bug, on purpose)."""
    ids = list(units["unit_id"])
    if inject == "caption-index":
        return encoders.checked(enc.encode_captions([encoders.caption_text(r) for r in units.to_dict("records")], ids, cache), ids,
                         f"encoder {enc.name} (captions)")
    return encoders.checked(enc.encode_units(units, base_dir, cache), ids, f"encoder {enc.name}", "pixels")


def dual_ablation(enc, name: str, units: pd.DataFrame, base_dir: Path, cache: Cache, queries: pd.DataFrame,
                  inject: str = "", depth: int = 100) -> dict[str, pd.DataFrame]:
    """One dual encoder's ablation runs: its page vectors (image), its embedding of the caption
    fields (caption) and their normalised sum (both), each searched with the same model's query
    vectors for both query sets. A unit the encoder could not read is out of all three indexes."""
    image = _dual_image(enc, units, base_dir, cache, inject)
    kept = units.set_index("unit_id").loc[list(image.ids)].reset_index()
    caption = encoders.checked(enc.encode_captions([encoders.caption_text(r) for r in kept.to_dict("records")], list(image.ids),
                                            cache), list(image.ids), f"encoder {name} (captions)")
    if caption.provenance != "caption-text":
        raise encoders.EncodeError(f"encoder {name}: encode_captions must return provenance 'caption-text', "
                            f"got {caption.provenance!r}")
    if inject == "caption-index":
        image = Vectors(image.encoder_id + "+caption-index", "caption-text", list(image.ids), image.data)
    indexes = build_indexes(image, caption, bool(inject))
    query_vectors = encoders.checked(enc.encode_queries(list(queries["text"]), list(queries["query_id"])),
                              list(queries["query_id"]), f"encoder {name} (queries)")
    return search_all(indexes, query_vectors, depth)


def shuffled_metadata(units: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The same units with their caption fields (CAPTION_COLUMNS) moved to other units: a seeded
    permutation with no fixed point, so every unit carries another unit's file name, alt text and
    caption while its pixels stay its own."""
    n = len(units)
    if n < 2:
        return units.copy()
    order = np.random.default_rng([seed, 62]).permutation(n)
    moved = np.roll(order, 1)                   # unit order[i] takes the fields of unit order[i - 1]
    target = np.empty(n, dtype=int)
    target[order] = moved
    out = units.copy()
    cols = [c for c in CAPTION_COLUMNS if c in units.columns]
    out[cols] = units[cols].to_numpy()[target]
    return out


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return bool(np.allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), atol=1e-6, rtol=0))


def metadata_probe(paths: Mapping[str, Callable[[pd.DataFrame], Vectors]], units: pd.DataFrame,
                   seed: int) -> dict[str, tuple[int, int]]:
    """The white-box half of the gate: run each pixel system's own input path (paths[name]: units ->
    what its index holds) on the units as they are and on the same units with their caption fields
    shuffled among them (``shuffled_metadata``). A path that reads only pixels gives the same
    vectors (or texts) for every unit; one that reads any caption field changes. Returns name ->
    (units whose input changed, units probed); pixels-rrf, the fusion of the two, is their union."""
    if not len(units):
        return {}
    other = shuffled_metadata(units, seed)
    changed: dict[str, set] = {}
    for name, path in paths.items():
        a, b = path(units), path(other)
        bd = dict(zip(b.ids, b.data))
        changed[name] = {u for u, x in zip(a.ids, a.data) if u not in bd or not _same(x, bd[u])}
    out = {name: (len(c), len(units)) for name, c in changed.items()}
    if {"image", "ocr-bm25"} <= set(changed):
        out["pixels-rrf"] = (len(changed["image"] | changed["ocr-bm25"]), len(units))
    return out


# The pixel systems the gate checks: the ablation's image index (ocr-minilm), BM25 over the same
# OCR text, and their fusion. Each is gated on its own and named in the gate's output.
PIXEL_SYSTEMS = ("image", "ocr-bm25", "pixels-rrf")


def pixel_system_runs(units: pd.DataFrame, base_dir: Path, cache: Cache, queries: pd.DataFrame,
                      image_run: pd.DataFrame, inject: str = "", ocr_engine: str = "", workers: int = 0,
                      depth: int = 100, text_source: str = "auto") -> dict[str, pd.DataFrame]:
    """Runs of every pixel system over both query sets, with the same injection as the image index
    (BM25 reads the caption fields for caption-index, or the OCR text with the metadata appended)."""
    bm25 = encoders.make_encoder("ocr-bm25", ocr_engine=ocr_engine, workers=workers, progress=False, text_source=text_source)
    texts = bm25_texts(units, base_dir, cache, inject, ocr_engine, workers, text_source)
    index = retrieve.BM25Index(accepts=("pixels",), name="ocr-bm25", allow_foreign_provenance=bool(inject)).add(texts)
    bm25_run = index.search(bm25.encode_queries(list(queries["text"]), list(queries["query_id"])), k=depth)
    return {"image": image_run, "ocr-bm25": bm25_run, "pixels-rrf": fusion.rrf([image_run, bm25_run], depth=depth)}


def bm25_texts(units: pd.DataFrame, base_dir: Path, cache: Cache, inject: str = "", ocr_engine: str = "",
               workers: int = 0, text_source: str = "auto") -> Vectors:
    """What the pixel BM25 index reads per unit: the OCR text, or the injected fault (the caption
    fields for caption-index; the OCR text with the metadata appended otherwise)."""
    bm25 = encoders.make_encoder("ocr-bm25", ocr_engine=ocr_engine, workers=workers, progress=False, text_source=text_source)
    texts = bm25.encode_units(units, base_dir, cache)
    if inject == "caption-index":
        return Vectors(texts.encoder_id + "+caption-index", "caption-text", list(texts.ids),
                       [encoders.caption_text(r) for r in units.to_dict("records")], "text")
    if inject:
        extra = dict(zip(units["unit_id"], injected_text(units, inject)))
        return Vectors(texts.encoder_id + f"+{inject}", f"pixels+{inject}", list(texts.ids),
                       [f"{t} {extra.get(u, '')}".strip() for u, t in zip(texts.ids, texts.data)], "text")
    return texts


def pixel_per_query(runs: Mapping[str, pd.DataFrame], queries: pd.DataFrame) -> pd.DataFrame:
    """recall@10 per pixel system and query (index = the system), with query_set and unit_id."""
    qrels = qrels_for(queries)
    meta = queries.set_index("query_id")[["query_set", "unit_id"]]
    frames = []
    for name, run in runs.items():
        pq = metrics.evaluate(qrels, run, ["recall_10"], level=2, complete=True).per_query[["recall_10"]].join(meta)
        frames.append(pq.reset_index().assign(index=name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["query_id", "recall_10", "query_set", "unit_id", "index"])




def judge_view(sheet: pd.DataFrame) -> pd.DataFrame:
    """What goes to a judge as CSV: item id, query text and an empty label column — no unit id."""
    return pd.DataFrame({"item": sheet["item"], "query": sheet["text"], "label": ""})
