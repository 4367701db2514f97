"""Stage 07 · the metric tables: top-1 under random negatives (questions as generated) beside
sufficient@k / supporting-only@k / neither@k under hard negatives (validated questions), each with
its own n and CI; evidence-complete metrics; paired significance; breakdowns; the fusion trace;
summary.html.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from lookalike.analysis import calibration
from lookalike.analysis import haystack as H
from lookalike.analysis import negatives
from lookalike.report import browse, charts
from lookalike.report import tables as readable
from lookalike.judging import store
from lookalike.report import site as report
from lookalike.report import claims as CL
from lookalike.report import summary
from lookalike.analysis import scoring
from lookalike.analysis import views
from lookalike.report.tables import fmt_ci
from lookalike.eval import stats
from lookalike.retrieval import catalog, fusion, systems
from lookalike.eval import trec
from lookalike.retrieval.encoders.base import Vectors

from lookalike.stages.base import Section, StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

STAGE = "07_metric_tables"
TITLE = 'Metric tables'
PLANNER_COLUMNS = ["measure", "system", "minus", "n", "difference", "se", "resolvable", "n_needed"]


def run(ctx: StageContext) -> StageResult:
    """Stage 07, in the order its notebook shows them: setup, top1_random, sufficiency, headline,
    sufficiency_chart, significance, planner, planted, breakdown, evidence, settings, source_structure, kinds,
    failures, haystack, fusion, then the summary page and the headline. Reads and writes what
    lookalike.stages.contracts.CONTRACTS["07_metric_tables"] declares."""
    cfg, res = ctx.config, ctx.result(STAGE, TITLE)
    x = read_inputs(ctx)
    scorer = res.add(*setup_section(x, cfg.retrieve.rrf_k, cfg.retrieve.depth, cfg.seed))
    top1_random = res.add(*top1_random_section(x.questions, x.distractors, scorer, cfg.seed, x.clusters,
                                               x.generated_runs))
    hard_runs, suff_hard, frames_hard, sufficiency, hard_sets = res.add(*sufficiency_section(
        x.questions, x.one_unit, x.distractors, x.units, scorer, x.corpus_runs, x.qrels_labels, cfg.seed, x.clusters,
        x.run_dir, cfg.negatives.template_k))
    headline = res.add(*headline_section(top1_random, suff_hard, hard_runs, frames_hard, cfg.seed, x.clusters,
                                         hard_sets))
    res.add(*sufficiency_chart_section(suff_hard))
    evidence_qrels, evidence, frames_ev, significance = res.add(*significance_section(
        x.strict, x.corpus_runs, cfg.seed, x.clusters, frames_hard))
    plan = res.add(*planner_section(significance))
    effects = res.add(*planted_section(x, cfg.seed))
    res.add(*breakdown_section(x.one_unit, x.units, frames_hard))
    res.add(*evidence_section(evidence))
    settings_view = res.add(*settings_section(x, evidence, evidence_qrels, cfg.retrieve.depth, cfg.seed,
                                              {"rerank": cfg.rerank.systems, "split": cfg.split.systems}))
    cells = res.add(*source_structure_section(x.units, frames_ev, x.strict, cfg.seed, x.clusters,
                                              cfg.report.source_column, summary.unit_noun(cfg.corpus.source,
                                                                                   x.units["content_type"])))
    res.add(*kinds_section(x.unit_vectors, evidence))
    res.add(*failures_section(x))
    haystack = res.add(*haystack_section(x.units, x.distractors, x.strict, cfg.seed, scorer, evidence_qrels,
                                         x.clusters, cfg.report.target_corpus_size, cfg.report.haystack_fractions,
                                         x.corpus_runs))
    trace_counts = res.add(*fusion_section(x.base, x.corpus_runs, x.current, x.strict, cfg.retrieve.rrf_k,
                                           cfg.retrieve.depth))
    res.add(*qrels_section(evidence_qrels, x.run_dir))
    tables = {"headline": headline, "evidence": evidence, "settings_view": settings_view, "cells": cells,
              "trace_counts": trace_counts, "effects": effects, "haystack": haystack, "plan": plan,
              "sufficiency": sufficiency, "significance": significance, "hard_sets": hard_sets,
              "top1_random": top1_random,
              "ties": {name: CL.tie_settled(run, dict(zip(x.one_unit["query_id"], x.one_unit["evidence_unit_ids"])),
                                            CL.VERDICT_K) for name, run in hard_runs.items()}}
    claims = res.add(*summary_section(x, tables, cfg))
    res.add(*stage_headline_section(claims["verdict"], x.current, x.earlier["label_agreement"]))
    return res


@dataclass
class MetricInputs:
    """What stage 07 reads from the run folder, once: earlier stages' tables, the encoded vectors, the
    validated questions' corpus runs, and what follows from them (the scored question sets, the
    clusters intervals resample, the systems and their encoder settings)."""

    run_dir: Path
    units: pd.DataFrame
    questions: pd.DataFrame
    validated: pd.DataFrame
    distractors: pd.DataFrame
    current: pd.DataFrame
    clusters: Any
    unit_clusters: Any
    base: list
    unit_vectors: dict
    corpus_runs: dict
    external: dict
    derived_plan: Any
    settings: dict
    # the systems' exported runs of the questions as generated (runs/): the order top-1 under random
    # negatives follows, as corpus_runs (runs_validated/) is the order of every validated view
    generated_runs: dict = field(default_factory=dict)
    # optional tables of earlier stages, empty when that stage did not write them on this corpus
    earlier: dict = field(default_factory=dict)

    @property
    def qrels_labels(self) -> pd.DataFrame:
        """The current labels as graded judgements (sufficient 2, supporting 1)."""
        return (store.qrels_from(self.current) if len(self.current)
                else pd.DataFrame(columns=["query_id", "unit_id", "relevance"]))

    @property
    def strict(self) -> pd.DataFrame:
        """The validated single-gold questions: what every corpus-wide figure is scored on."""
        return self.validated[self.validated["slice"] == "single-gold"].reset_index(drop=True)

    @property
    def one_unit(self) -> pd.DataFrame:
        """The validated single-gold questions with one evidence unit: what hard-negative figures score."""
        strict = self.strict
        return strict[~strict["evidence_unit_ids"].str.contains(";")].reset_index(drop=True)


def read_inputs(ctx: StageContext) -> MetricInputs:
    """Stage 07's reading step: every table, vector file and run it scores (stages.contracts lists them)."""
    read, run_dir = ctx.table, ctx.run_dir
    units = ctx.units()
    questions, validated, distractors = read("questions"), read("questions_validated"), read("distractors")
    # intervals resample clusters of questions (stats.cluster: by default each question's gold document)
    clusters = ctx.clusters(dict(zip(questions["query_id"], questions["evidence_unit_ids"]))
                            | dict(zip(validated["query_id"], validated["evidence_unit_ids"])))
    base = systems.base_systems(run_dir, ctx.config.encode.encoders)
    unit_vectors = {n: Vectors.load(run_dir / "vectors" / f"{n}.npz") for n in base}
    # the fusions and document context stage 06 pooled, from the one catalogue (retrieval.catalog)
    derived_plan = catalog.plan(base, {n: systems.declared_provenance(n, unit_vectors[n]) for n in base}, "07",
                                units["doc_id"])
    sys_table = ctx.optional_table("systems")
    external = ({n: trec.read_run_file(run_dir / "runs" / f"{n}.run")[0]
                 for n in sorted(sys_table.loc[sys_table["provenance"] == "external", "system"])}
                if sys_table is not None and "provenance" in sys_table.columns else {})
    # +rerank / +split systems: like your runs, only their top-depth ranking is known, so the candidate
    # views restrict it (stage 02's, questions as generated) rather than re-score; the systems are the
    # ones stage 02's systems table lists, not whatever run files a folder holds
    derived = sorted(n for n in sys_table["system"].astype(str) if n.endswith(("+rerank", "+split"))) \
        if sys_table is not None and "system" in sys_table.columns else []
    external.update({n: trec.read_run_file(run_dir / "runs" / f"{n}.run")[0] for n in derived})
    # runs_validated/ holds exactly the systems stage 06 ranked (systems.write_runs empties it first)
    corpus_runs = {p.stem: trec.read_run_file(p)[0] for p in sorted((run_dir / "runs_validated").glob("*.run"))}

    def optional(name: str) -> pd.DataFrame:
        return read(name) if ctx.has_table(name) else pd.DataFrame()

    # tables some corpora have and others not (the demo's answer key, the leak check, the ladder)
    earlier = {"planted": optional("planted"), "question_validation": optional("question_validation"),
               "validation_judgements": optional("validation_judgements"), "leak_gate": optional("leak_gate"),
               "leak_planted": optional("leak_planted"), "leak_per_query": optional("leak_per_query"),
               "judge_door_summary": optional("judge_door_summary"), "validity_ladder": optional("validity_ladder"),
               "hard_vs_random": optional("hard_vs_random"), "label_agreement": optional("label_agreement"),
               "annotator_agreement": optional("annotator_agreement"), "systems": optional("systems")}
    generated_runs = {name: trec.read_run_file(run_dir / "runs" / f"{name}.run")[0]
                      for name in list(base) + list(derived_plan.rescorings())
                      if (run_dir / "runs" / f"{name}.run").is_file()}
    return MetricInputs(run_dir, units, questions, validated, distractors, read("labels_current"), clusters,
                        ctx.unit_clusters(), base, unit_vectors, corpus_runs, external, derived_plan,
                        dict(ctx.encoder_settings(), run_dir=run_dir), generated_runs, earlier)


def setup_section(x: MetricInputs, rrf_k: int, depth: int, seed: int) -> tuple[Section, scoring.CandidateSystems]:
    """The scorer every candidate view uses (base systems, the catalogue's fusions and document context,
    your runs and +rerank / +split rankings), and what is scored: questions, labelled pairs, systems."""
    sec = Section(STAGE, "setup")
    scorer = scoring.CandidateSystems(x.units, x.unit_vectors, x.derived_plan.fusions(), x.external, x.settings, rrf_k,
                                depth, seed, doc_context=x.derived_plan.rescorings())
    sec.say(f"validated single-gold questions: {len(x.strict)} ({len(x.one_unit)} with one evidence unit); "
            f"labelled pairs: {len(x.current)}; systems: "
            f"{', '.join(scorer.names)}")
    return sec, scorer


def top1_random_section(questions: pd.DataFrame, distractors: pd.DataFrame, scorer, seed: int,
                        clusters, generated_runs: dict | None = None) -> tuple[Section, Any]:
    """Top-1 under random negatives, questions as generated (page-single): each system's share
    with its CI beside chance (one over the candidates). Writes top1_random_original."""
    sec = Section(STAGE, "top1_random")
    orig = questions[questions["evidence_structure"] == "page-single"].reset_index(drop=True)
    rand = distractors[distractors["axis"] == "random"]
    rand_c = {q: [g] + list(rand[rand["query_id"] == q]["unit_id"]) for q, g in zip(orig["query_id"], orig["evidence_unit_ids"])}
    orig_qrels = systems.evidence_qrels(orig)
    random_rows = []
    for name, run in sorted(scorer.runs(orig, rand_c, order=generated_runs).items()):
        pq = scoring.per_query(orig_qrels, run, ["top1"], list(orig["query_id"]))
        ci = stats.bootstrap_ci(pq["top1"].to_numpy(), 2000, rng=np.random.default_rng([seed, 70]),
                                clusters=stats.cluster_array(clusters, list(pq.index)))
        # chance: a random pick among the gold and its random negatives, 1 / (1 + negatives), averaged
        chance = float(np.mean([1.0 / len(set(rand_c[q])) for q in pq.index])) if len(pq) else float("nan")
        random_rows.append({"system": name, "n": ci.n, "top1": ci.estimate, "top1_lo": ci.lo, "top1_hi": ci.hi,
                            "chance": chance, "interval": stats.interval_words(clusters)})
    top1_random = pd.DataFrame(random_rows, columns=["system", "n", "top1", "top1_lo", "top1_hi", "chance", "interval"])
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(top1_random.to_string(index=False) if len(top1_random) else "no page-single questions")
    sec.html_table("top1_random", top1_random)
    sec.table("top1_random_original", top1_random, sort_by=["system"])
    return sec, top1_random

def sufficiency_section(questions: pd.DataFrame, one_unit: pd.DataFrame, distractors: pd.DataFrame,
                        units: pd.DataFrame, scorer, corpus_runs: dict, qrels_labels: pd.DataFrame, seed: int,
                        clusters, run_dir: Path, template_k: int = negatives.TEMPLATE_K
                        ) -> tuple[Section, dict, pd.DataFrame, dict, pd.DataFrame, pd.DataFrame]:
    """Sufficient / supporting-only / neither at k under hard negatives (the gold and its look-alikes;
    only questions whose candidate set is larger than the largest k, so no figure is 1 by construction)
    and over the corpus, validated one-unit questions. Returns the hard runs, the hard rows, per-query
    frames, the whole table and the hard sets; writes sufficiency, hard_sets and runs_hard/."""
    sec = Section(STAGE, "sufficiency")
    # the gold against every look-alike (its per-axis distractors and the rest of its template, or its
    # appearance cluster), all labelled in stage 06
    hard_c, hard_sets = negatives.hard_sets(questions, distractors, units, set(one_unit["query_id"]), max(scoring.HARD_KS), template_k)
    in_hard = one_unit[one_unit["query_id"].isin(set(hard_c))].reset_index(drop=True)
    sizes = [len(v) - 1 for v in hard_c.values()]
    scored = hard_sets[hard_sets["query_id"].isin(set(one_unit["query_id"]))]
    sec.say(f"hard columns: {len(in_hard)} of the {len(one_unit)} validated one-page questions, each ranked among "
            f"the gold and {np.median(sizes) if sizes else 0:.0f} look-alikes (median; {min(sizes, default=0)}–"
            f"{max(sizes, default=0)}); by method: "
            + (", ".join(f"{m} {n}" for m, n in scored["method"].value_counts().sort_index().items()) or "none"))
    if negatives.capped_templates_note(units, template_k):
        sec.say(negatives.capped_templates_note(units, template_k))
    outside = scored[~scored["in_hard"]]
    if len(outside):
        sec.say(f"outside the hard columns ({len(outside)}): " + "; ".join(
            f"{q} ({r})" for q, r in zip(outside["query_id"].head(10), outside["reason"].head(10)))
            + (" …" if len(outside) > 10 else ""))
    hard_runs = scorer.runs(in_hard, hard_c, order=corpus_runs)
    suff_hard, frames_hard = scoring.sufficiency(qrels_labels, hard_runs, list(in_hard["query_id"]), "hard",
                                           ks=scoring.HARD_KS, seed=seed, clusters=clusters)
    suff_corpus, frames_corpus = scoring.sufficiency(qrels_labels, corpus_runs, list(one_unit["query_id"]), "corpus", seed=seed,
                                               clusters=clusters)
    sufficiency = pd.concat([suff_hard, suff_corpus], ignore_index=True)
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(sufficiency[sufficiency["k"].isin([1, 5])].drop(
            columns=["supporting_only_lo", "supporting_only_hi", "neither_lo", "neither_hi"]).to_string(index=False))
    sec.html_table("sufficiency", sufficiency[sufficiency["k"].isin([1, 5])])
    sec.table("sufficiency", sufficiency, sort_by=["system", "negatives", "k"])
    sec.table("hard_sets", hard_sets, sort_by=["query_id"])

    # the hard rankings, so lookalike audit can score the hard columns again from files
    sec.after_save.append(lambda: systems.write_runs(hard_runs, run_dir, "runs_hard"))
    return sec, hard_runs, suff_hard, frames_hard, sufficiency, hard_sets

def headline_section(top1_random: pd.DataFrame, suff_hard: pd.DataFrame, hard_runs, frames_hard, seed: int,
                     clusters, hard_sets: pd.DataFrame) -> tuple[Section, Any]:
    """The headline table: top-1 under random negatives beside sufficient@1/@5, supporting-only@5 and
    neither@5 under hard negatives, each with its own n and CI, chance beside each rate (a random ranking
    of the same candidates), and the paired gain from slot 1 to 5."""
    sec = Section(STAGE, "headline")
    head_rows = []
    tr = top1_random.set_index("system")
    sh = suff_hard.set_index(["system", "k"])
    for name in sorted(hard_runs):
        row = {"system": name}
        if name in tr.index:
            r = tr.loc[name]
            row["top-1, random negatives (as generated)"] = fmt_ci(r["top1"], r["top1_lo"], r["top1_hi"])
            row["chance (top-1)"] = f"{r['chance']:.2f}" + (" — indistinguishable" if r["top1_lo"] <= r["chance"] else "")
            row["n (as generated)"] = int(r["n"])
        for label, m, k in (("sufficient@1", "sufficient", 1), ("sufficient@5", "sufficient", 5),
                            ("supporting-only@5", "supporting_only", 5), ("neither@5", "neither", 5)):
            r = sh.loc[(name, k)]
            row[f"{label}, hard (validated)"] = fmt_ci(r[m], r[f"{m}_lo"], r[f"{m}_hi"])
        row["chance @1 · @5 (hard)"] = " · ".join(f"{CL.hard_chance(hard_sets, k):.2f}" for k in (1, 5))
        row["n (validated)"] = int(sh.loc[(name, 1), "n"])
        g = scoring.slot_gain(frames_hard[name], "sufficient_1", "sufficient_5", seed=seed, clusters=clusters)
        row["gain slot 1→5 (paired)"] = fmt_ci(g["gain"], g["gain_lo"], g["gain_hi"])
        head_rows.append(row)
    headline = pd.DataFrame(head_rows)
    sec.say(headline.to_string(index=False) if len(headline) else "no validated questions")
    sec.html_table("headline", headline)
    sec.table("headline", headline, sort_by=["system"] if len(headline) else None)
    return sec, headline

def sufficiency_chart_section(suff_hard: pd.DataFrame) -> tuple[Section]:
    """The stacked chart of what the top k holds under hard negatives, one panel a system."""
    sec = Section(STAGE, "sufficiency_chart")
    sec.figure("07_sufficiency", charts.sufficiency(suff_hard))
    return (sec,)

def significance_section(strict: pd.DataFrame, corpus_runs, seed: int, clusters,
                         frames_hard) -> tuple[Section, Any, Any, Any, Any]:
    """Evidence-complete scores over the corpus, and every pair of systems compared (paired
    randomisation test, Holm within each measure). Writes evidence_complete and significance."""
    sec = Section(STAGE, "significance")
    evidence_qrels = systems.evidence_qrels(strict)
    evidence, frames_ev = scoring.evidence_complete(evidence_qrels, corpus_runs, strict, seed=seed, clusters=clusters)
    sig = []
    # every pair of systems, Holm-adjusted within each measure: which differences are real
    for measure, frames, col in (("sufficient@5 (hard)", frames_hard, "sufficient_5"),
                                 ("nDCG@10 (corpus, evidence)", frames_ev, "ndcg_cut_10")):
        if len(frames) >= 2:
            t = stats.pairwise_table({k: f[col] for k, f in frames.items()}, seed=seed, clusters=clusters)
            sig.append(t.assign(measure=measure))
    significance = pd.concat(sig, ignore_index=True) if sig else pd.DataFrame()
    with pd.option_context("display.float_format", "{:.3f}".format):
        if len(significance):
            shown = significance.assign(difference=[fmt_ci(d, lo, hi) for d, lo, hi in zip(
                significance["delta"], significance["delta_lo"], significance["delta_hi"])])
            sec.say(shown[["measure", "system", "baseline", "n", "difference", "p_randomisation", "p_holm"]].rename(
                columns={"baseline": "minus"}).to_string(index=False))
            sec.html_table("significance", shown[["measure", "system", "baseline", "n", "difference", "p_randomisation",
                                                  "p_holm"]].rename(columns={"baseline": "minus"}))
            real = significance[significance["p_holm"] < 0.05]
            sec.say(f"\n{len(real)} of {len(significance)} pairs differ with Holm-adjusted p < 0.05 "
                    f"(randomisation test, {stats.interval_words(clusters).split(', ')[1]})")
        else:
            sec.say("nothing to compare")
    sec.table("evidence_complete", evidence, sort_by=["system", "aggregate", "evidence_structure", "measure", "k"])
    sec.table("significance", significance, sort_by=["measure", "system", "baseline"] if len(significance) else None)
    return sec, evidence_qrels, evidence, frames_ev, significance

def planner_section(significance: pd.DataFrame) -> tuple[Section, Any]:
    """The sample-size planner: per pair, the difference this n resolves and the questions 80% power
    would need. Writes sample_size."""
    sec = Section(STAGE, "planner")
    plan = pd.DataFrame(columns=PLANNER_COLUMNS)
    if len(significance):
        plan = pd.DataFrame([{"measure": r.measure, "system": r.system, "minus": r.baseline, "n": int(r.n),
                              "difference": r.delta, **stats.sample_size(r.delta, r.delta_lo, r.delta_hi, int(r.n))}
                             for r in significance.itertuples()], columns=PLANNER_COLUMNS)
        with pd.option_context("display.float_format", "{:.3f}".format):
            sec.say(plan.drop(columns=["se"]).assign(n_needed=plan["n_needed"].map(
                lambda v: "never (no difference)" if v == np.inf else f"{v:.0f}")).to_string(index=False))
        sec.html_table("planner", plan.drop(columns=["se"]).assign(n_needed=plan["n_needed"].map(
            lambda v: "never (no difference)" if v == np.inf else f"{v:.0f}")))
        sec.say("\nresolvable: the smallest difference this n resolves at 95% (the paired CI's half-width); n_needed: "
                "questions for 80% power to resolve the observed difference (normal approximation from the "
                "clustered bootstrap SE). Both are for one comparison, before Holm's adjustment for the number "
                "of pairs.")
    else:
        sec.say("nothing to compare")
    # no observed difference needs no finite n: the table says so in words, never 'inf'
    never = plan["n_needed"].map(lambda v: v == np.inf) if len(plan) else pd.Series(dtype=bool)
    sec.table("sample_size", plan.assign(n_needed=plan["n_needed"].where(~never),
                                         note=np.where(never, "never: no difference was observed", ""))
              if len(plan) else plan.assign(note=pd.Series(dtype=str)))
    return sec, plan

def planted_section(x: MetricInputs, seed: int) -> tuple[Section, pd.DataFrame]:
    """Calibration on a corpus that plants effects (the demo): each planted effect beside what the
    stage that measures it recovered, with its CI and whether it was recovered. Writes planted_effects."""
    sec = Section(STAGE, "planted")
    effects = pd.DataFrame(columns=calibration.EFFECT_COLUMNS)
    units, questions, earlier = x.units, x.questions, x.earlier
    if len(earlier["planted"]):
        appearance = x.run_dir / "vectors" / "appearance.npz"
        revision_units = 0
        if appearance.is_file():
            _, pools = negatives.hard_negatives(units, Vectors.load(appearance).data, list(units["unit_id"]), k=1,
                                        axes=("revision",))
            revision_units = int((pools["pool"] > 0).sum())
        ladder = earlier["validity_ladder"]
        from lookalike.data import demo   # the generator's own rule for which questions it under-specified

        planted_qs = set(questions.loc[demo.under_specified(questions, units.assign(
            revision=units["revision"].astype(int))).to_numpy(), "query_id"])
        effects = calibration.planted_effects(
            earlier["planted"], validation=earlier["question_validation"], revision_pool_units=revision_units,
            planted_questions=planted_qs, judgements=earlier["validation_judgements"],
            leak_gate=earlier["leak_gate"], leak_planted=earlier["leak_planted"],
            leak_per_query=earlier["leak_per_query"], door_summary=earlier["judge_door_summary"],
            ladder_slopes=negatives.ladder_slopes(ladder) if len(ladder) else {}, unit_clusters=x.unit_clusters,
            clusters=x.clusters, seed=seed)
        with pd.option_context("display.float_format", "{:.3f}".format, "display.max_colwidth", 60):
            sec.say(effects[["effect", "planted", "recovered", "lo", "hi", "ok"]].to_string(index=False))
            sec.html_table("planted", effects[["effect", "planted", "recovered", "lo", "hi", "ok", "explanation"]].assign(
                recovered=effects["recovered"].map(readable.as_number), lo=effects["lo"].map(readable.as_number),
                hi=effects["hi"].map(readable.as_number)).rename(columns={"lo": "recovered_lo", "hi": "recovered_hi"}))
            sec.say()
            for r in effects.itertuples():
                sec.say(f"{'ok ' if r.ok else 'NOT OK'} {r.effect}: {r.explanation} [{r.check}]")
    else:
        sec.say("this corpus plants nothing (the demo does): no calibration table")
    if len(effects):
        sec.table("planted_effects", effects)
    return sec, effects

def breakdown_section(one_unit: pd.DataFrame, units: pd.DataFrame, frames_hard) -> tuple[Section, Any]:
    """Sufficient@5 under hard negatives by register and by stratum, per system. Writes breakdown."""
    sec = Section(STAGE, "breakdown")
    meta = one_unit.set_index("query_id")
    stratum = meta["evidence_unit_ids"].map(units.set_index("unit_id")["content_type"])
    parts = []
    for name, f in sorted(frames_hard.items()):
        for by, groups in (("register", meta["register"]), ("stratum", stratum)):
            g = f["sufficient_5"].groupby(groups.reindex(f.index), sort=True).agg(["mean", "size"]).reset_index()
            g.columns = ["group", "sufficient_5", "n"]
            parts.append(g.assign(system=name, by=by))
    breakdown = (pd.concat(parts, ignore_index=True)[["system", "by", "group", "n", "sufficient_5"]] if parts
                 else pd.DataFrame(columns=["system", "by", "group", "n", "sufficient_5"]))
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(breakdown.pivot_table(index=["by", "group"], columns="system", values="sufficient_5").to_string(na_rep="·")
              if len(breakdown) else "no validated questions")
    if len(breakdown):
        wide = breakdown.pivot_table(index=["by", "group", "n"], columns="system", values="sufficient_5").reset_index()
        wide.columns.name = None
        sec.html_table("breakdown", wide)
    sec.table("breakdown", breakdown, sort_by=["system", "by", "group"])
    return sec, breakdown

def evidence_section(evidence: pd.DataFrame) -> tuple[Section]:
    """Evidence-complete measures at k = 10 (Macro over evidence structures and Micro), and
    RecallAll@10 by evidence structure."""
    sec = Section(STAGE, "evidence")
    with pd.option_context("display.float_format", "{:.3f}".format):
        agg = evidence[(evidence["aggregate"] != "structure") & (evidence["k"] == 10)]
        sec.say(agg.pivot_table(index=["system", "aggregate"], columns="measure", values="value").to_string(na_rep="·")
              if len(agg) else "no validated questions")
        if len(agg):
            wide = readable.ci_pivot(agg, ["system", "aggregate", "n"])
            # a Macro row's n is the evidence structures it averages, a Micro row's its questions
            wide.insert(wide.columns.get_loc("n") + 1, "n counts",
                        wide["aggregate"].map({"macro": "structures", "micro": "questions"}))
            sec.html_table("evidence", wide, caption="each cell: estimate [95% CI]; Macro resamples each evidence "
                                                     "structure on its own (stratified), Micro all questions")
        sec.say()
        st = evidence[(evidence["aggregate"] == "structure") & (evidence["k"] == 10) & (evidence["measure"] == "RecallAll")]
        sec.say(scoring.macro_weights(evidence))
        sec.say("RecallAll@10 by evidence structure (n per cell in tables/evidence_complete.csv):")
        sec.say(st.pivot_table(index="evidence_structure", columns="system", values="value").to_string(na_rep="·") if len(st) else "-")
    return (sec,)

def settings_section(x: MetricInputs, evidence: pd.DataFrame, evidence_qrels: pd.DataFrame, depth: int, seed: int,
                     derived: dict) -> tuple[Section, pd.DataFrame]:
    """The benchmark's settings per family (Base, Ctx, B+Ctx, Rerank, Q-Split) on the validated
    single-gold questions; derived names the +rerank / +split systems asked for. Writes settings."""
    sec = Section(STAGE, "settings")
    strict, clusters, base, unit_vectors = x.strict, x.clusters, x.base, x.unit_vectors
    # the benchmark's settings per family: Base / Ctx / B+Ctx / Rerank / Q-Split (analysis.views)
    ctx_qv = systems.encode_queries(strict, [n for n in base if unit_vectors[n].kind != "text"],
                                     **x.settings) \
        if len(strict) else {}
    ctx_runs, no_ctx = views.context_runs(base, unit_vectors, ctx_qv, x.units, list(strict["query_id"]), x.corpus_runs,
                                      depth, seed) if len(strict) else ({}, {})
    extra = {k: r for k, r in ctx_runs.items() if k not in x.corpus_runs}
    extra_ev, _ = (scoring.evidence_complete(evidence_qrels, extra, strict, seed=seed, clusters=clusters) if extra
                   else (pd.DataFrame(columns=evidence.columns), {}))
    settings_long = views.settings_table(base, evidence, extra_ev, no_ctx, derived)
    settings_view = views.settings_wide(settings_long)
    if len(settings_view):
        sec.say(f"n = {len(strict)} validated single-gold questions, scored against their evidence units; "
                "Macro averages the evidence structures (each resampled on its own), Micro the questions; "
                f"{stats.interval_words(clusters)}")
        sec.say(settings_view.to_string(index=False))
        sec.html_table("settings", settings_view)
    else:
        sec.say("no validated questions: no settings table")
    sec.table("settings", settings_long, sort_by=["family", "setting", "measure", "aggregate"])
    return sec, settings_view

def source_structure_section(units: pd.DataFrame, frames_ev: dict, strict: pd.DataFrame, seed: int, clusters,
                             source_column: str, noun: str) -> tuple[Section, pd.DataFrame]:
    """RecallAll@5 by source (report.source_column) and evidence structure, as a table and a
    heatmap, or why there is none. Writes recall_all_by_source."""
    sec = Section(STAGE, "source_structure")
    cells = pd.DataFrame(columns=views.HEATMAP_COLUMNS)
    if source_column not in units.columns:
        sec.say(f"report.source_column {source_column!r} is not a units column ({', '.join(units.columns)}): "
                "no source × structure view")
    elif not (units[source_column].astype(str).str.strip() != "").any():
        sec.say(f"report.source_column {source_column!r} is empty for every unit of this corpus: no source × "
                "structure view")
    elif len(frames_ev):
        cells = views.source_structure(frames_ev, strict, units, source_column, seed=seed, clusters=clusters)
        with pd.option_context("display.float_format", "{:.2f}".format):
            sec.say(f"RecallAll@5 by {source_column} (rows) × evidence structure; n per cell in "
                    "tables/recall_all_by_source.csv; · no question of that source and structure")
            sec.say(cells.pivot_table(index=["system", "source"], columns="evidence_structure",
                                      values="recall_all_5").to_string(na_rep="·"))
    else:
        sec.say("no validated questions: no source × structure view")
    sec.figure("07_source_structure", charts.source_structure(cells, source_column, noun)
               if len(cells) else None)
    sec.table("recall_all_by_source", cells, sort_by=["system", "source", "evidence_structure"])
    return sec, cells

def kinds_section(unit_vectors, evidence: pd.DataFrame) -> tuple[Section, Any]:
    """Single- against multi-vector systems on the evidence-complete measures, or which kinds ran."""
    sec = Section(STAGE, "kinds")
    kinds = views.kinds_table(unit_vectors, evidence)
    if len(kinds):
        with pd.option_context("display.float_format", "{:.3f}".format):
            sec.say(kinds.to_string(index=False))
        sec.html_table("kinds", kinds)
    else:
        present = sorted({v.kind for v in unit_vectors.values()})
        sec.say(f"single- vs multi-vector: only {', '.join(present) or 'no'} systems ran (add colpali and bi, or a "
                "multi-vector plug-in, to compare the two kinds on this corpus)")
    sec.table("kinds", kinds, sort_by=["system", "measure", "aggregate"])
    return sec, kinds

def failures_section(x: MetricInputs) -> tuple[Section]:
    """Every validated single-gold question and system: the top 5 over the corpus, the gold's rank, the
    look-alike that beat it and on which axis it differs; the failure browser is written after the tables.
    Writes failures."""
    sec = Section(STAGE, "failures")
    # every (question, system): the top 5 over the corpus, the gold's rank, and the look-alike that beat it
    strict, current, units = x.strict, x.current, x.units
    failures = browse.failure_rows(strict, x.corpus_runs, current, units, x.distractors)
    counts = browse.outcome_counts(failures)
    if len(failures):
        sec.say(f"{len(failures)} rows: {failures['query_id'].nunique()} validated single-gold questions × "
                f"{failures['system'].nunique()} systems, each system's top {browse.TOP_K} over the whole corpus "
                "(current labels; an unlabelled page counts as neither)")
        sec.say(counts.to_string(index=False))
        lost = failures[failures["hard_negative_loss"]]
        if len(lost):
            sec.say("\nthe axis on which the look-alike that beat the gold differs (rows):")
            sec.say(pd.crosstab(lost["axis"], lost["system"]).to_string())
            if (lost["axis"] == "cluster").any():
                sec.say("cluster: the look-alike is a page of the gold's appearance cluster (this corpus names no "
                        "templates), not a page of its template that differs on one field")
        sec.say("\nbrowse them: browse/index.html")
    else:
        sec.say("no validated single-gold questions: nothing to browse")
    sec.table("failures", failures, sort_by=["system", "query_id"])
    if len(failures):
        note = summary.sentence(store.provenance(current, x.earlier["label_agreement"])[0])
        sec.after_save.append(lambda: browse.write_browser(x.run_dir, failures, strict, units, x.run_dir,
                                                           labels_note=note))
    return (sec,)

def haystack_section(units: pd.DataFrame, distractors: pd.DataFrame, strict: pd.DataFrame, seed: int, scorer,
                     evidence_qrels: pd.DataFrame, clusters, target_size: int,
                     fractions, corpus_runs: dict | None = None) -> tuple[Section, pd.DataFrame]:
    """The haystack curve: the same questions against nested random subsamples of the corpus (gold and
    hard distractors always kept), extrapolated to target_size when it is larger. Writes haystack_curve."""
    sec = Section(STAGE, "haystack")
    # the same questions against nested random subsamples of the corpus, gold and hard distractors always kept
    target = int(target_size) or len(units)
    sizes = H.subsample_sizes(len(units), list(fractions))
    hard_d = distractors[distractors["axis"] != "random"].groupby("query_id")["unit_id"].apply(list).to_dict()
    kept = {q: [u for u in str(ev).split(";") if u] + hard_d.get(q, [])
            for q, ev in zip(strict["query_id"], strict["evidence_unit_ids"])}
    hay_sets = H.candidate_sets(kept, H.nested_subsamples(list(units["unit_id"]), sizes, seed))
    # recall@10 and top-1 read nothing below the run depth: each ranking is cut there
    # the exported runs' order decides every tie, so the 100% point is runs_validated/'s own figure
    hay_runs = scorer.runs_for(strict, hay_sets, depth=max(scorer.depth, 10), order=corpus_runs)
    hay_pq: dict[tuple[str, str], dict[int, pd.Series]] = {}
    for size, runs in hay_runs.items():
        for name, run in runs.items():
            pq = scoring.per_query(evidence_qrels, run, ["recall_10", "top1"], list(strict["query_id"]))
            for m in ("recall_10", "top1"):
                hay_pq.setdefault((name, m), {})[size] = pq[m]
    haystack = H.curve({k: pd.DataFrame(v) for k, v in hay_pq.items()}, target_size=target, clusters=clusters, seed=seed)
    if len(haystack):
        smallest = hay_sets[sizes[0]].sizes()
        sec.say(f"{len(strict)} validated single-gold questions; corpus sizes {', '.join(map(str, sizes))} units "
                f"(nested random subsamples, seed {seed}); each question's gold and hard distractors are always "
                f"kept, so at {sizes[0]} units a question ranks {np.median(smallest):.0f} candidates (median)")
        extrap = haystack[haystack["extrapolated"]]
        sec.say("target corpus size: " + (f"{target} units (report.target_corpus_size): the last row per system is an "
                                          "extrapolation, a line in log corpus size, not a measurement"
                                          if len(extrap) else f"{target} units, this corpus: no extrapolation"))
        with pd.option_context("display.float_format", "{:.3f}".format):
            sec.say(haystack.to_string(index=False))
        sec.html_table("haystack", haystack.rename(columns={"lo": "value_lo", "hi": "value_hi"}))
    else:
        sec.say("no validated single-gold questions: no haystack curve")
    sec.figure("07_haystack", charts.haystack(haystack) if len(haystack) else None)
    sec.table("haystack_curve", haystack, sort_by=["system", "measure", "corpus_size"])
    return sec, haystack


def fusion_section(base: list, corpus_runs: dict, current: pd.DataFrame, strict: pd.DataFrame, rrf_k: int,
                   depth: int) -> tuple[Section, pd.DataFrame]:
    """Where fusion loses evidence: the base systems' corpus runs fused three ways (rrf, round-robin,
    score-sum), and each question whose sufficient page a component found but the fused top 10 dropped.
    Writes fusion_trace and fusion_trace_counts."""
    sec = Section(STAGE, "fusion")
    components = {n: corpus_runs[n] for n in base if n in corpus_runs}
    fused = {m: fusion.fuse(m, list(components.values()), rrf_k=rrf_k, depth=depth)
             for m in fusion.FUSIONS} if len(components) >= 2 else {}
    good = current[current["label"] == "sufficient"].groupby("query_id")["unit_id"].apply(set).to_dict()
    suff_sets = {q: good.get(q, set()) for q in strict["query_id"]}
    trace, trace_counts = scoring.fusion_trace(components, fused, suff_sets, k=10)
    with pd.option_context("display.float_format", "{:.3f}".format):
        if len(trace):
            sec.say(trace.groupby("method")[["in_some_pool", "in_fused_top_k", "lost"]].sum().to_string())
            sec.say()
            sec.say(trace_counts.pivot_table(index="component", columns="method", values="questions_lost").to_string(na_rep="·"))
        else:
            sec.say("fewer than two component systems: no fusion to trace")
    sec.table("fusion_trace", trace, sort_by=["method", "query_id"])
    sec.table("fusion_trace_counts", trace_counts, sort_by=["method", "component"])
    return sec, trace_counts


def qrels_section(evidence_qrels: pd.DataFrame, run_dir: Path) -> tuple[Section]:
    """The judgements every corpus-wide figure here is scored against, written beside runs_validated/:
    lookalike eval (or trec_eval) on the two gives the same figures (lookalike audit checks that it does)."""
    sec = Section(STAGE, "qrels")

    def write() -> None:
        (run_dir / "qrels").mkdir(exist_ok=True)
        if len(evidence_qrels):
            trec.write_qrels(evidence_qrels.sort_values(["query_id", "unit_id"]),
                             run_dir / "qrels" / "evidence_validated.qrels")

    sec.after_save.append(write)
    return (sec,)


def summary_inputs(x: MetricInputs, t: dict, claims: dict, source_column: str, noun: str) -> summary.SummaryInputs:
    """What report.summary builds the page's blocks from: this stage's tables and claims, and the words
    only the analysis layer computes (the ladder's slopes, what the Macro figure averages)."""
    ladder = x.earlier["validity_ladder"]
    return summary.SummaryInputs(
        claims=claims, headline=t["headline"], evidence=t["evidence"], macro_words=scoring.macro_weights(t["evidence"]),
        settings_view=t["settings_view"], trace_counts=t["trace_counts"], effects=t["effects"], haystack=t["haystack"],
        source_cells=len(t["cells"]), scored=len(x.strict), interval=stats.interval_words(x.clusters),
        hard_vs_random=bool(len(x.earlier["hard_vs_random"])), ladder=ladder,
        ladder_slopes=negatives.ladder_slopes(ladder) if len(ladder) else {}, source_column=source_column, noun=noun)


def summary_section(x: MetricInputs, t: dict, cfg) -> tuple[Section, dict]:
    """summary.html, the stakeholder page: the lead (run, corpus, date, verdict) over the summary blocks;
    the verdict and what was scored as claim records (report.claims), written to claims.json and shown
    from there. Written after the tables and figures it embeds."""
    sec = Section(STAGE, "summary")
    noun = summary.unit_noun(cfg.corpus.source, x.units["content_type"])
    made = ([CL.scored_claim(x.questions, x.earlier["question_validation"], x.strict["query_id"], x.one_unit["query_id"],
                             t["hard_sets"], int(pd.to_numeric(t["top1_random"]["n"], errors="coerce").max())
                             if len(t["top1_random"]) else 0, noun=noun),
             CL.verdict_claim(t["sufficiency"], t["significance"], t["hard_sets"], noun=noun, ties=t["ties"],
                              reads=CL.reads_of(x.earlier["systems"]))]
            + derived_claims(x, t, cfg.corpus.source, noun))
    record = CL.claims_record(made)
    claims = {c["id"]: c for c in record["claims"]}
    blocks = summary.blocks(summary_inputs(x, t, claims, cfg.report.source_column, noun))
    # claims.json holds what the page says: a sentence whose block is not shown (nothing was scored) is no claim
    on_page = "\n".join(b.words() for b in blocks)
    record["claims"] = [c for c in record["claims"] if c["id"] in ("scored", "verdict") or c["text"] in on_page]
    lead = summary.lead(cfg.run, summary.corpus_words(cfg.corpus.source, len(x.units), len(x.questions),
                                            noun, Path(cfg.corpus.root or cfg.corpus.manifest).name),
                   datetime.now(UTC).strftime("%Y-%m-%d"), claims["verdict"]["text"])
    sec.say(claims["verdict"]["text"])

    def write() -> None:
        (x.run_dir / "claims.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        report.write_summary(x.run_dir, f"{cfg.title} — summary", blocks, lead)

    sec.after_save.append(write)
    return sec, claims


def derived_claims(x: MetricInputs, t: dict, source: str, noun: str) -> list[dict]:
    """The summary's other sentences as claims (report.claims.RULES): each the words of one function of
    report.summary on the tables it reads, which the audit calls again on the tables as written."""
    tables = {"hard_sets": t["hard_sets"], "hard_vs_random": x.earlier["hard_vs_random"], "headline": t["headline"],
              "top1_random_original": t["top1_random"],
              "sample_size": t["plan"], "haystack_curve": t["haystack"],
              "question_validation": x.earlier["question_validation"], "label_agreement": x.earlier["label_agreement"],
              "labels_current": x.current, "annotator_agreement": x.earlier["annotator_agreement"],
              "judge_door_summary": x.earlier["judge_door_summary"]}
    interval = stats.interval_words(x.clusters)
    rests_on = (("the demo generator's evidence pages" if source == "demo" else "the evidence pages your judgements "
                 "name") + ", not the labels")
    return [CL.derived_claim("hard_words", tables, noun), CL.derived_claim("ceiling_note", tables, noun),
            CL.derived_claim("harder_words", tables, noun),
            CL.derived_claim("haystack_sentence", tables, noun, corpus_size=len(x.units), interval=interval,
                             rests_on=rests_on),
            CL.derived_claim("planner_words", tables, noun, interval=interval),
            CL.derived_claim("flagged_words", tables, noun), CL.derived_claim("labels_made", tables, noun),
            CL.derived_claim("people_words", tables, noun), CL.derived_claim("labels_rest_on", tables, noun)]


def stage_headline_section(verdict: dict, current: pd.DataFrame, labels_note: pd.DataFrame) -> tuple[Section]:
    """What index.html says of stage 07: the summary's verdict (claims.json) and what the labels rest on."""
    sec = Section(STAGE, "stage_headline")
    sentence = f"{verdict['text']} {summary.sentence(store.provenance(current, labels_note)[0])}"
    sec.headline(sentence, figure="07_sufficiency" if verdict["kind"] != "none" else "",
                 numbers={f"{verdict['measure']}, {f['key']['system']}": f"{f['value']:.2f}"
                          for f in verdict["figures"]})
    return (sec,)
