"""Stage 02 · encode the corpus and rank the questions: what each encoder reads, throughput and
cache, whether look-alikes look alike, the systems' runs (runs/<system>.run) and a first look.

Writes tables/systems.csv and tables/encoders.csv, vectors/<encoder>.npz, runs/<system>.run.
"""

from __future__ import annotations

from pathlib import Path


import pandas as pd
import torch
from lookalike.io import inputs
from lookalike import params
from lookalike.retrieval import derived as D
from lookalike.retrieval import catalog, systems
from lookalike.eval import ranking, trec
from lookalike.io.cache import Cache
from lookalike.retrieval.encoders import appearance as appearance_mod, resolve_device

from lookalike.report import charts
from lookalike.stages.base import Section, StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

STAGE = "02_encode"
TITLE = 'Encoders and systems'


def run(ctx: StageContext) -> StageResult:
    """Stage 02, in the order its notebook shows them: device, encode, provenance, appearance, runs,
    derived, first_look, first_look_chart, then the systems table and the headline. Reads and writes what
    lookalike.stages.contracts.CONTRACTS["02_encode"] declares."""
    cfg = ctx.config
    res = ctx.result(STAGE, TITLE)

    units = ctx.units()
    questions = ctx.table("questions")
    cache = Cache(cfg.encode.cache_dir or None)
    settings = ctx.encoder_settings()

    res.add(*device_section(cfg.encode.device))
    unit_vectors, encode_table = res.add(*encode_section(units, ctx.run_dir, cfg.encode, cache, settings))
    res.add(*provenance_section(encode_table))
    res.add(*appearance_section(unit_vectors, units))
    candidate_recall, runs, provenance = res.add(*runs_section(
        questions, units, unit_vectors, cfg.encode.encoders, settings, cfg.retrieve, cfg.seed, cfg.corpus.page_base,
        ctx.run_dir))
    res.add(*derived_section(runs, provenance, questions, unit_vectors, units, cache, settings, cfg, ctx.run_dir))
    look = res.add(*first_look_section(ctx.optional_table("qrels"), units, runs, provenance, questions, ctx.clusters,
                                       cfg.seed, ctx.run_dir))
    res.add(*first_look_chart_section(look))
    res.add(*systems_section(look, unit_vectors, encode_table, candidate_recall, ctx.run_dir))
    res.add(*headline_section(look, unit_vectors, runs, questions, cfg.corpus.source))
    return res


def device_section(encode_device) -> tuple[Section]:
    """The device the encoders run on, its dtype, the torch version and the GPU when there is one."""
    sec = Section(STAGE, "device")
    device, dtype = resolve_device(encode_device)
    sec.say(f"device: {device} ({dtype}); torch {torch.__version__}; CUDA available: {torch.cuda.is_available()}")
    if torch.cuda.is_available():
        sec.say("GPU:", torch.cuda.get_device_name(0))
    return (sec,)


def encode_section(units: pd.DataFrame, run_dir: Path, encode, cache: Cache,
                   settings: dict) -> tuple[Section, dict, pd.DataFrame]:
    """Every page encoded by every encoder (Ray Data actors or this process, through the content-hash
    cache): the vectors, their kind and dimension. Writes encoders."""
    sec = Section(STAGE, "encode")
    engine = encode.engine
    unit_vectors, encode_table, ray_table = systems.encode_units(
        units, run_dir, encode.encoders, cache, engine=engine, ray_address=encode.ray_address,
        ray_object_store_mb=encode.ray_object_store_mb, store_root=run_dir / "vectors", **settings)
    if ray_table is not None:
        sec.timings["02_engine_ray"] = ray_table.reset_index(drop=True)   # workers, items and seconds depend on the cluster
        sec.say("engine: ray — pages encoded by Ray Data actors into the cache, then read back here (per-stage "
                "workers, items and seconds: timings/02_engine_ray.csv); "
                + "; ".join(f"{r.encoder}: {r.computed} computed" + (f", {r.failed} failed" if r.failed else "")
                            for r in ray_table.itertuples() if not r.note))
    else:
        sec.say("engine: local — pages encoded in this process (OCR in worker processes)")
    sec.show["encode"] = encode_table.drop(columns=["seconds", "units_per_s", "cache_hits", "cache_misses"])
    sec.timings["02_encode"] = encode_table[["encoder", "units", "cache_hits", "cache_misses", "seconds", "units_per_s"]]

    for name, vecs in unit_vectors.items():
        for unit_id, reason in vecs.stats.get("failed", []):      # reported and skipped, never dropped silently
            sec.say(f"{name}: unit {unit_id} could not be encoded and is left out of its index: {reason}")
    sec.table("encoders", encode_table.drop(columns=["seconds", "units_per_s", "cache_hits", "cache_misses"]),
              sort_by=["encoder"])
    return sec, unit_vectors, encode_table


def provenance_section(encode_table) -> tuple[Section]:
    """What each system's scores rest on (its provenance: pixels, OCR text, captions, your run)."""
    sec = Section(STAGE, "provenance")
    sec.say(encode_table[["encoder", "provenance", "kind", "shape"]].to_string(index=False))
    if "text" in encode_table.columns:
        for row in encode_table[encode_table["text"].astype(str) != ""].itertuples():
            sec.say(f"{row.encoder} read its page text: {row.text}")
    return (sec,)


def appearance_section(unit_vectors, units: pd.DataFrame) -> tuple[Section]:
    """The appearance encoder's sanity check: how often a unit's nearest neighbour shares its template,
    against chance (or why there is no template to check)."""
    sec = Section(STAGE, "appearance")
    if "appearance" in unit_vectors and units["template_id"].astype(str).str.strip().ne("").any():
        observed, chance, n = appearance_mod.same_template_neighbour_rate(unit_vectors["appearance"].data,
                                                                          units["template_id"])
        of = "units" if n == len(units) else f"a seeded sample of {n:,} of the {len(units):,} units"
        sec.say(f"nearest neighbour shares the template: {observed:.3f} of {of} (chance: {chance:.3f}; "
                + (f"{observed / chance:.1f}x)" if chance > 0 else "no two units share a template)"))
    elif "appearance" in unit_vectors:
        sec.say("no template metadata: the nearest-neighbour template check does not apply")
    return (sec,)


def runs_section(questions: pd.DataFrame, units: pd.DataFrame, unit_vectors: dict, encoders, settings: dict, retrieve,
                 seed: int, page_base, run_dir: Path) -> tuple[Section, dict, dict, dict]:
    """Each system's ranking of every question over the corpus (exact or candidate search within the
    memory budget), your runs read beside them, written to runs/ in TREC format."""
    sec = Section(STAGE, "runs")
    query_vectors = systems.encode_queries(questions, encoders, run_dir=run_dir, **settings) if len(questions) else {}
    runs, candidate_recall = systems.search_systems(
        unit_vectors, query_vectors, retrieve.depth, retrieve.rrf_k, retrieve.memory_budget_mb, search=retrieve.search,
        n_candidates=retrieve.candidates, clusters=retrieve.centroids, recall_sample=retrieve.recall_sample, seed=seed)
    for name, r in sorted(candidate_recall.items()):
        sec.say(f"{name}: candidate search ({r['candidates']} pages per question by centroid MaxSim, then exact) — "
                f"candidate recall against exact MaxSim on {r['n']} sampled questions: top 10 {r['recall_10']:.3f}, "
                f"top 100 {r['recall_100']:.3f}")
    written = dict(runs)        # the runs as this section leaves them, written when the stage is saved
    sec.after_save.append(lambda: systems.write_runs(written, run_dir))
    if not runs:
        sec.say("no questions with this corpus: nothing to rank (supply questions to get runs)")
    provenance = {name: v.provenance for name, v in unit_vectors.items()}
    for name, members in catalog.plan(list(provenance), provenance, "02").built.items():
        if name in runs:
            provenance[name] = catalog.provenance(name, members, provenance)
    for spec in retrieve.external_runs:
        name, sep, path = (x.strip() for x in str(spec).partition("="))
        if not sep or not name or not path:
            raise ValueError(f"retrieve.external_runs: {spec!r} is not name=path")
        if name in runs:
            raise ValueError(f"retrieve.external_runs: {name!r} is already a built-in system; choose another name")
        ext, ext_skipped = inputs.read_external_run(params.repo_file(path), units["unit_id"], questions["query_id"], page_base)
        runs[name], provenance[name] = ext, "external"
        sec.after_save.append(lambda ext=ext, name=name: ranking.write_run(ext, run_dir / "runs" / f"{name}.run",
                                                                             tag=name))
        sec.say(f"external run {name}: {ext['query_id'].nunique()} questions, {len(ext)} rows kept, {len(ext_skipped)} skipped")
        if len(ext_skipped):
            sec.say(ext_skipped.head(10).to_string(index=False))
    return sec, candidate_recall, runs, provenance


def derived_section(runs: dict, provenance: dict, questions: pd.DataFrame, unit_vectors: dict, units: pd.DataFrame,
                    cache: Cache, settings: dict, cfg, run_dir: Path) -> tuple[Section, D.Derived]:
    """The derived systems the catalogue builds here: +rerank and +split rankings from their base runs,
    and what could not be built with the reason. Writes rerank_scores, query_splits, derived_failed."""
    sec = Section(STAGE, "derived")
    derived = D.build(runs, questions, unit_vectors, units, run_dir, cache, cfg.rerank, cfg.split, cfg.encode,
                      settings, cfg.retrieve.depth)
    for name, run in derived.runs.items():
        runs[name] = run
        provenance[name] = provenance.get(name.rsplit("+", 1)[0], "pixels")
        sec.after_save.append(lambda run=run, name=name: ranking.write_run(run, run_dir / "runs" / f"{name}.run",
                                                                             tag=name))
    sec.say("\n".join(derived.notes) if derived.notes else
            "no reranking or query splitting configured (rerank.systems, split.systems)")
    sec.table("rerank_scores", derived.rerank_scores, sort_by=["system", "query_id", "new_rank"])
    sec.table("query_splits", derived.splits, sort_by=["system", "query_id", "position"])
    sec.table("derived_failed", derived.failed, sort_by=["system", "query_id"])
    return sec, derived


def first_look_section(given: pd.DataFrame | None, units: pd.DataFrame, runs: dict, provenance: dict,
                       questions: pd.DataFrame, clusters_of, seed: int, run_dir: Path) -> tuple[Section, pd.DataFrame]:
    """The first look: every system scored against the questions' evidence (page or document level),
    with the judgements it is scored against exported to qrels/evidence.qrels."""
    sec = Section(STAGE, "first_look")
    if given is not None and len(given) and (given["level"] == "document").all():
        # document-level judgements: each system's ranking becomes a document ranking (best page per document)
        unit_doc = dict(zip(units["unit_id"], units["doc_id"]))
        qrels = given[["query_id", "unit_id", "relevance"]]
        look = systems.first_look({n: inputs.document_run(r, unit_doc) for n, r in runs.items()}, qrels, provenance, seed=seed)
        look = systems.with_chance(look, units["doc_id"].nunique())
        sec.say("judgements are per document: each system is scored by its best page per document (runs/ rank "
                "pages, so no qrels/evidence.qrels is written beside them; tables/qrels.csv holds the judgements)")
    else:
        qrels = given[["query_id", "unit_id", "relevance"]] if given is not None and len(given) else systems.evidence_qrels(questions)
        look = systems.first_look(runs, qrels, provenance, seed=seed,
                                  clusters=clusters_of(dict(zip(questions["query_id"], questions["evidence_unit_ids"]))))
        look = systems.with_chance(look, len(units))
        if len(qrels):
            # the judgements the first look is scored against, beside runs/: `lookalike eval -c -m recall.10
            # qrels/evidence.qrels runs/NAME.run` (or trec_eval) gives this table's recall_10 for NAME
            sec.after_save.append(lambda: trec.write_qrels(qrels, run_dir / "qrels" / "evidence.qrels"))
            sec.say("the evidence judgements scored here: qrels/evidence.qrels (TREC qrels, beside runs/)")
    if len(look) and "chance_recall_10" in look.columns:
        sec.say(f"chance: a random ranking's Recall@10 is {look['chance_recall_10'].iloc[0]:.3f} (10 / "
                f"{round(10 / look['chance_recall_10'].iloc[0]) if look['chance_recall_10'].iloc[0] < 1 else 'all'} "
                "candidates); a system whose 95% CI holds it is indistinguishable from chance")
    tied = look[look["ties_10"] > 0] if "ties_10" in look.columns else look.head(0)
    if len(tied):
        sec.say("tied scores decide Recall@10 (an evidence unit in or out of the top 10 only by its unit id, the canonical order) on "
                + "; ".join(f"{int(r.ties_10)} of {int(r.n)} questions for {r.system}" for r in tied.itertuples()))
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(look.to_string(index=False) if len(look) else "no runs")
    sec.html_table("first_look", look)
    return sec, look


def first_look_chart_section(look: pd.DataFrame) -> tuple[Section]:
    """The first-look chart: each system's Recall@10 against the evidence units with its 95% CI."""
    sec = Section(STAGE, "first_look_chart")
    sec.figure("02_first_look", charts.first_look(look))
    return (sec,)


def systems_section(look: pd.DataFrame, unit_vectors: dict, encode_table: pd.DataFrame, candidate_recall: dict,
                    run_dir: Path) -> tuple[Section]:
    """The systems table later stages read (first look, encoder id and kind, exact or candidate search with
    its recall against exact search) and the vectors, written to vectors/ after the tables. Writes systems."""
    sec = Section(STAGE, "systems")

    def write_vectors() -> None:
        for name, vecs in unit_vectors.items():
            vecs.save(run_dir / "vectors", name)

    sec.after_save.append(write_vectors)
    systems_table = look.merge(encode_table.rename(columns={"encoder": "system"})[["system", "encoder_id", "kind"]],
                               on="system", how="left")
    if len(systems_table):
        # exact systems: "exact"; candidate-based ones: the share of the exact top 10 / 100 their candidates hold
        systems_table["search"] = ["candidates" if n in candidate_recall else "exact" for n in systems_table["system"]]
        for k in (10, 100):
            systems_table[f"candidate_recall_{k}"] = [candidate_recall[n][f"recall_{k}"] if n in candidate_recall
                                                      else float("nan") for n in systems_table["system"]]
    sec.table("systems", systems_table, sort_by=["system"])
    return (sec,)


def headline_section(look: pd.DataFrame, unit_vectors: dict, runs: dict, questions: pd.DataFrame,
                     source: str) -> tuple[Section]:
    """What index.html says of stage 02: the best pixel-only system's Recall@10 with its CI against chance,
    or why nothing was scored."""
    sec = Section(STAGE, "headline")
    pixel_rows = (look[look["provenance"] == "pixels"].sort_values("recall_10", ascending=False, kind="mergesort")
                  if len(look) else look)
    best = pixel_rows.iloc[0] if len(pixel_rows) else None
    sentence = (f"{len(runs)} systems ranked {len(questions)} questions; the best pixel-only system "
                f"({best['system']}) has Recall@10 {best['recall_10']:.2f} [{best['recall_10_lo']:.2f}, "
                f"{best['recall_10_hi']:.2f}] against "
                + ("the generator's evidence units" if source == "demo" else "your judgements")
                + (f"; chance is {best['chance_recall_10']:.2f}" + (", and it is indistinguishable from chance"
                                                                   if best["vs_chance"] != "above chance" else "")
                   if "chance_recall_10" in best.index else "")
                + (f"; tied scores settle it on {int(best['ties_10'])} of {int(best['n'])} questions (by unit id)"
                   if int(best.get("ties_10", 0) or 0) else "")
                + " (first look: no hard negatives yet)."
                if best is not None else
                f"{len(runs)} systems ranked {len(questions)} questions; none names an evidence page (no page "
                "judgements), so nothing is scored here (supply corpus.qrels)." if runs and len(questions) else
                f"{len(unit_vectors)} encoders ran; no questions, so no runs.")
    sec.headline(
        sentence,
        figure="02_first_look" if len(look) else "",
        numbers={f"recall_10 {r.system}": f"{r.recall_10:.3f} [{r.recall_10_lo:.3f}, {r.recall_10_hi:.3f}]"
                 for r in look.itertuples()} if len(look) else {},
    )
    return (sec,)
