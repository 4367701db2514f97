"""Stage 01 · stratify the corpus: load and validate it, units per stratum, the stratified sample.

Writes tables/units.csv, questions.csv, qrels.csv (your judgements, normalised), facts.csv and
answer_key.csv (the demo's answer key), visible.csv (what each demo page visibly shows, for blind queries), planted.csv (what
the demo generator planted for the report to recover), sample.csv, strata.csv, skipped.csv.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lookalike.data import schema as C
from lookalike.io import corpus as corpus_io, inputs as I
from lookalike.report import charts, images
from lookalike.stages.base import StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

TITLE = "Corpus and strata"


def load_corpus(ctx: StageContext, render: bool = True):
    """The corpus as every command reads it (stage 01, ``lookalike leak-check``, ``lookalike check``
    with render=False): every corpus.* setting that decides which pages exist and how they look
    (source, manifest, root, strict, dpi, pages, max_pages, name_pattern, max_pixels)."""
    return corpus_io.load(ctx.get("corpus.source"), ctx.seed, ctx.dirs["corpus"], ctx.get("corpus.demo_size"),
                          str(ctx.path("corpus.manifest") or ""), str(ctx.path("corpus.root") or ""),
                          ctx.get("corpus.strict"), dpi=ctx.get("corpus.dpi"), pages=ctx.get("corpus.pages"),
                          max_pages=ctx.get("corpus.max_pages"), name_pattern=ctx.get("corpus.name_pattern"),
                          max_pixels=ctx.get("corpus.max_pixels"), render=render)


def run(ctx: StageContext) -> StageResult:
    """Stage 01: its sections, in the order it builds them: load, strata, sample, questions. Reads and writes
    what lookalike.stages.contracts.CONTRACTS["01_stratify_corpus"] declares."""
    seed = ctx.get('seed')
    corpus_questions = str(ctx.path('corpus.questions') or '')
    corpus_question_columns = ctx.get('corpus.question_columns')
    corpus_question_ids = ctx.get('corpus.question_ids')
    corpus_qrels = str(ctx.path('corpus.qrels') or '')
    corpus_qrels_level = ctx.get('corpus.qrels_level')
    corpus_page_base = ctx.get('corpus.page_base')
    sample_per_stratum = ctx.get('sample.per_stratum')
    res = StageResult('01_stratify_corpus', TITLE, ctx.run_dir)

    RUN = ctx.run_dir
    rng = np.random.default_rng([seed, 1])     # stage 01's own stream, derived from the run seed

    res.section("load")
    loaded = load_corpus(ctx)
    units, questions, facts, skipped = loaded.units, loaded.questions, loaded.facts, loaded.skipped
    qrels = loaded.qrels                                      # BEIR / ViDoRe inputs bring their own
    if corpus_questions:
        mine, q_skipped = I.read_questions(corpus_questions, corpus_question_columns, corpus_question_ids)
        if corpus_qrels:
            qrels, r_skipped = I.read_judgements(corpus_qrels, units["unit_id"], mine["query_id"], corpus_qrels_level,
                                                 corpus_page_base, doc_ids=units["doc_id"].unique())
            q_skipped = pd.concat([q_skipped, r_skipped], ignore_index=True)
        questions = I.as_questions(mine, qrels, units, corpus_qrels_level)
        skipped = pd.concat([skipped, q_skipped], ignore_index=True)
    qrels = qrels.assign(level=(corpus_qrels_level if corpus_questions else "page") if len(qrels) else pd.Series(dtype=str))
    res.say(f"units kept: {len(units)}   documents: {units['doc_id'].nunique()}   "
          f"templates: {units['template_id'].nunique()}   rows skipped: {len(skipped)}")
    if corpus_questions:
        res.say(f"questions kept: {len(questions)}   judgements kept: {len(qrels)} ({corpus_qrels_level} level)")
    if len(skipped):
        res.say(skipped.head(40).to_string(index=False))
        if len(skipped) > 40:
            res.say(f"... and {len(skipped) - 40} more in tables/skipped.csv")

    duplicates = corpus_io.identical_images(units, RUN)
    if len(duplicates):
        groups = duplicates.groupby("duplicate_of")["unit_id"].apply(lambda s: ", ".join(s))
        res.say(f"byte-identical page images: {len(duplicates)} units in {len(groups)} groups (tables/duplicates.csv); "
                "they are kept, and kept out of each other's negative sets:")
        res.say("\n".join(f"  {ids}" for ids in groups.head(20)))

    res.show["units"] = units.head(8)

    res.section("strata")
    strata = C.strata_counts(units)
    res.say(strata.to_string(index=False))
    res.say()
    res.say(units.groupby("content_type").size().rename("units").to_string())

    res.figure("01_strata", charts.strata(strata))

    res.figure("01_montage", images.montage(units, RUN))

    res.section("sample")
    sample = C.stratified_sample(units, sample_per_stratum, rng)
    res.say(sample.groupby("content_type").size().rename("sampled").to_string())
    res.say("first ids:", ", ".join(sample["unit_id"].head(6)))

    res.section("questions")
    if len(questions):
        res.say(pd.crosstab(questions["evidence_structure"], questions["register"], margins=True).to_string())
        res.say()
        res.say(f"questions: {len(questions)}   fully qualified: {questions['qualified'].astype(bool).mean():.3f}")
    else:
        res.say("no questions supplied with this corpus")

    # save
    res.table("units", units, sort_by=["unit_id"])
    res.table("questions", questions, sort_by=["query_id"])
    res.table("facts", facts, sort_by=["unit_id", "metric", "period", "member"])
    res.table("answer_key", loaded.answer_key, sort_by=["query_id", "need"])
    res.table("visible", loaded.visible, sort_by=["unit_id"])
    res.table("planted", loaded.planted)
    res.table("sample", sample, sort_by=["unit_id"])
    res.table("strata", strata)
    res.table("skipped", skipped.assign(row=pd.to_numeric(skipped["row"], errors="coerce").astype("Int64")),
                       sort_by=["source", "row", "unit_id"])
    res.table("qrels", qrels, sort_by=["query_id", "unit_id"])
    res.table("duplicates", duplicates, sort_by=["unit_id"])
    named = strata[strata["template_id"].astype(str) != ""]
    top = named.sort_values("units", ascending=False, kind="mergesort").iloc[0] if len(named) else None
    res.headline(
        f"{len(units)} units in {units['doc_id'].nunique()} documents"
        + (f" across {len(named)} templates; the largest template ({top['template_id']}) has {int(top['units'])} units."
           if top is not None else " (no template metadata: strata are by content type only).")
        + f" {len(skipped)} rows skipped."
        + (f" {len(duplicates)} units are byte-identical copies of another (tables/duplicates.csv)." if len(duplicates) else ""),
        figure="01_strata",
        numbers={"units": len(units), "documents": int(units["doc_id"].nunique()), "questions": len(questions),
                 "sampled": len(sample), "skipped": len(skipped), "duplicates": len(duplicates)},
    )
    return res

