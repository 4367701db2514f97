"""Stage 01 · stratify the corpus: load and validate it, units per stratum, the stratified sample.

Writes tables/units.csv, questions.csv, qrels.csv (your judgements, normalised), facts.csv and
answer_key.csv (the demo's answer key), visible.csv (what each demo page visibly shows, for blind queries), planted.csv (what
the demo generator planted for the report to recover), sample.csv, strata.csv, skipped.csv.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lookalike import params as P
from lookalike.data import schema
from lookalike.io import corpus as corpus_io, inputs
from lookalike.report import charts, images
from lookalike.retrieval import systems
from lookalike.vocab import unit_noun
from lookalike.stages.base import Section, StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

STAGE = "01_stratify_corpus"
TITLE = "Corpus and strata"


def load_corpus(ctx: StageContext, render: bool = True):
    """The corpus as every command reads it (stage 01, ``lookalike leak-check``, ``lookalike check``
    with render=False): every corpus.* setting that decides which pages exist and how they look
    (source, manifest, root, strict, dpi, pages, max_pages, name_pattern, max_pixels)."""
    c = ctx.config.corpus
    return corpus_io.load(c.source, ctx.seed, ctx.dirs["corpus"], c.demo_size, str(P.repo_path(c.manifest) or ""),
                          str(P.repo_path(c.root) or ""), c.strict, dpi=c.dpi, pages=c.pages, max_pages=c.max_pages,
                          name_pattern=c.name_pattern, max_pixels=c.max_pixels, render=render)


# the fields of the units preview: what a unit is, what strata and hard negatives are made of, and its
# caption (the text the leak ablation keeps away from the image path; it wraps)
PREVIEW_FIELDS = ("unit_id", "page", "template_id", "entity", "metric", "period", "revision", "content_type",
                  "text_source", "caption")


def run(ctx: StageContext) -> StageResult:
    """Stage 01, in the order its notebook shows them: load (the corpus, your questions and judgements),
    strata, sample, questions. Reads and writes what lookalike.stages.contracts.CONTRACTS["01_stratify_corpus"]
    declares."""
    cfg = ctx.config
    res = ctx.result(STAGE, TITLE)
    mine = your_questions(str(P.repo_path(cfg.corpus.questions) or ""), str(P.repo_path(cfg.corpus.qrels) or ""),
                          cfg.corpus)
    loaded = load_corpus(ctx)
    # where each page's text will come from (encode.text_source): a PDF page's own text layer, or OCR
    loaded.units = loaded.units.assign(text_source=systems.text_sources(loaded.units, ctx.run_dir, cfg.encode.text_source,
                                                                        cfg.encode.ocr_engine))
    # units.csv is written by this stage: the noun comes from the units just loaded
    res.noun = unit_noun(cfg.corpus.source, loaded.units["content_type"] if "content_type" in loaded.units else ())
    units, questions, skipped, duplicates = res.add(*load_section(loaded, mine, ctx.run_dir))
    strata = res.add(*strata_section(units, ctx.run_dir))
    rng = np.random.default_rng([cfg.seed, 1])     # stage 01's own stream, derived from the run seed
    sample = res.add(*sample_section(units, cfg.sample.per_stratum, rng))
    res.add(*questions_section(questions))
    res.add(*headline_section(units, strata, skipped, duplicates, questions, sample))
    return res


@dataclass(frozen=True)
class YourQuestions:
    """Where your questions and judgements are and how to read them (corpus.questions, corpus.qrels and
    the corpus.* settings that say how their columns and ids read); an empty questions path: none."""

    questions: str
    qrels: str
    columns: str | Mapping[str, str] | None = None
    ids: str = ""
    level: str = "page"
    page_base: int = 1


def your_questions(questions: str, qrels: str, corpus) -> YourQuestions:
    """Your questions and qrels files, read with the corpus's question columns, ids, qrels level and page base."""
    return YourQuestions(questions, qrels, corpus.question_columns, corpus.question_ids, corpus.qrels_level,
                         corpus.page_base)


def load_section(loaded, mine: YourQuestions, run_dir: Path) -> tuple[Section, pd.DataFrame, pd.DataFrame,
                                                                       pd.DataFrame, pd.DataFrame]:
    """The corpus as loaded, with your questions and judgements read against its units (when you bring
    them), every skipped row said, and byte-identical page images grouped. Returns units, questions,
    skipped rows and duplicates; writes units, questions, facts, answer_key, visible, planted, skipped,
    qrels, duplicates."""
    sec = Section(STAGE, "load")
    units, questions, facts, skipped = loaded.units, loaded.questions, loaded.facts, loaded.skipped
    qrels = loaded.qrels                                      # BEIR / ViDoRe inputs bring their own
    if mine.questions:
        asked, q_skipped = inputs.read_questions(mine.questions, mine.columns, mine.ids)
        if mine.qrels:
            qrels, r_skipped = inputs.read_judgements(mine.qrels, units["unit_id"], asked["query_id"], mine.level,
                                                 mine.page_base, doc_ids=units["doc_id"].unique())
            q_skipped = pd.concat([q_skipped, r_skipped], ignore_index=True)
        questions = inputs.as_questions(asked, qrels, units, mine.level)
        skipped = pd.concat([skipped, q_skipped], ignore_index=True)
    qrels = qrels.assign(level=(mine.level if mine.questions else "page") if len(qrels) else pd.Series(dtype=str))
    sec.say(f"units kept: {len(units)}   documents: {units['doc_id'].nunique()}   "
            f"templates: {_templates_words(units)}   rows skipped: {len(skipped)}")
    if "text_source" in units.columns and len(units):
        sec.say(f"page text: {systems.text_source_words(units['text_source'])} (units.csv: text_source)")
    if mine.questions:
        sec.say(f"questions kept: {len(questions)}   judgements kept: {len(qrels)} ({mine.level} level)")
    if len(skipped):
        sec.say(skipped.head(40).to_string(index=False))
        if len(skipped) > 40:
            sec.say(f"... and {len(skipped) - 40} more in tables/skipped.csv")

    duplicates = corpus_io.identical_images(units, run_dir)
    if len(duplicates):
        groups = duplicates.groupby("duplicate_of")["unit_id"].apply(lambda s: ", ".join(s))
        sec.say(f"byte-identical page images: {len(duplicates)} units in {len(groups)} groups (tables/duplicates.csv); "
                "they are kept, and kept out of each other's negative sets:")
        sec.say("\n".join(f"  {ids}" for ids in groups.head(20)))

    # the first units as a reader checks them, in the fields strata and negatives are built from (a
    # table that fits the window); the other fields, and any no unit fills, are named
    empty = [c for c in units.columns if len(units) and not units[c].astype(str).str.strip().ne("").any()]
    shown = [c for c in PREVIEW_FIELDS if c in units.columns and c not in empty]
    rest = [c for c in units.columns if c not in shown and c not in empty]
    sec.say("the first units below show " + ", ".join(shown)
            + (f"; their other fields ({', '.join(rest)})" if rest else "")
            + (f"{' and' if rest else ';'} the fields no unit fills ({', '.join(empty)})" if empty else "")
            + (" are in tables/units.csv" if rest or empty else ""))
    sec.show["units"] = units[shown].head(8)
    sec.table("units", units, sort_by=["unit_id"])
    sec.table("questions", questions, sort_by=["query_id"])
    sec.table("facts", facts, sort_by=["unit_id", "metric", "period", "member"])
    sec.table("answer_key", loaded.answer_key, sort_by=["query_id", "need"])
    sec.table("visible", loaded.visible, sort_by=["unit_id"])
    sec.table("planted", loaded.planted)
    sec.table("skipped", skipped.assign(row=pd.to_numeric(skipped["row"], errors="coerce").astype("Int64")),
              sort_by=["source", "row", "unit_id"])
    sec.table("qrels", qrels, sort_by=["query_id", "unit_id"])
    sec.table("duplicates", duplicates, sort_by=["unit_id"])
    return sec, units, questions, skipped, duplicates


def strata_section(units: pd.DataFrame, run_dir: Path) -> tuple[Section, pd.DataFrame]:
    """Units per stratum (template x content type), the strata chart and a montage of pages."""
    sec = Section(STAGE, "strata")
    strata = schema.strata_counts(units)
    sec.say(strata.to_string(index=False))
    sec.say()
    sec.say(units.groupby("content_type").size().rename("units").to_string())
    sec.figure("01_strata", charts.strata(strata))
    sec.figure("01_montage", images.montage(units, run_dir))
    sec.table("strata", strata)
    return sec, strata


def sample_section(units: pd.DataFrame, per_stratum: int, rng: np.random.Generator) -> tuple[Section, pd.DataFrame]:
    """The stratified sample: up to per_stratum units of each content type, drawn with rng."""
    sec = Section(STAGE, "sample")
    sample = schema.stratified_sample(units, per_stratum, rng)
    sec.say(sample.groupby("content_type").size().rename("sampled").to_string())
    sec.say("first ids:", ", ".join(sample["unit_id"].head(6)))
    sec.table("sample", sample, sort_by=["unit_id"])
    return sec, sample


def questions_section(questions: pd.DataFrame) -> tuple[Section]:
    """The questions by evidence structure and register, and the share that is fully qualified."""
    sec = Section(STAGE, "questions")
    if len(questions):
        sec.say(pd.crosstab(questions["evidence_structure"], questions["register"], margins=True).to_string())
        sec.say()
        sec.say(f"questions: {len(questions)}   fully qualified: {questions['qualified'].astype(bool).mean():.3f}")
    else:
        sec.say("no questions supplied with this corpus")
    return (sec,)


def headline_section(units: pd.DataFrame, strata: pd.DataFrame, skipped: pd.DataFrame, duplicates: pd.DataFrame,
                     questions: pd.DataFrame, sample: pd.DataFrame) -> tuple[Section]:
    """What index.html says of the corpus: units, documents, templates (or that there are none), the
    largest template, rows skipped and byte-identical copies."""
    sec = Section(STAGE, "headline")
    named = strata[strata["template_id"].astype(str) != ""]
    top = named.sort_values("units", ascending=False, kind="mergesort").iloc[0] if len(named) else None
    sec.headline(
        f"{len(units)} units in {units['doc_id'].nunique()} documents"
        + (f" across {len(named)} templates; the largest template ({top['template_id']}) has {int(top['units'])} units."
           if top is not None else " (no template metadata: strata are by content type only).")
        + f" {len(skipped)} rows skipped."
        + (f" {len(duplicates)} units are byte-identical copies of another (tables/duplicates.csv)." if len(duplicates) else ""),
        figure="01_strata",
        numbers={"units": len(units), "documents": int(units["doc_id"].nunique()), "questions": len(questions),
                 "sampled": len(sample), "skipped": len(skipped), "duplicates": len(duplicates)},
    )
    return (sec,)


def _templates_words(units: pd.DataFrame) -> str:
    """How many templates the metadata names, and on how many units ('none' without template_id)."""
    named = units["template_id"].astype(str) != "" if len(units) else pd.Series(dtype=bool)
    if not named.any():
        return "none (no template_id metadata)"
    n = units.loc[named, "template_id"].nunique()
    return f"{n}" + (f" (template_id on {int(named.sum())} of {len(units)} units)" if not named.all() else "")
