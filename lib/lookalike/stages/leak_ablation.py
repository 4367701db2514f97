"""Stage 03 · leak ablation: does anything text-shaped reach the image path? Image / caption / both
indexes × blind / caption-derived queries, pooled blind judging, the ablation table, resolution,
breakdowns and the gate. `lookalike leak-check` runs the same functions on a sample.
"""

from __future__ import annotations

from pathlib import Path

from collections.abc import Sequence
from typing import Any

import pandas as pd
from lookalike import params as P
from lookalike.analysis import leakage
from lookalike.io.cache import Cache
from lookalike.retrieval import encoders
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import systems
from lookalike.eval import stats
from lookalike.vocab import LABELS, unit_noun

from lookalike.report import charts
from lookalike.stages.base import Section, StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

STAGE = "03_leak_ablation"
TITLE = 'Leak ablation'
PLANTED_LEAK_COLUMNS = ["system", "input", "verdict", "probe_changed", "difference"]


def dual_encoders(ctx: StageContext) -> dict:
    """The run's dual encoders (encode.encoders entries that also embed caption text into their query
    space: clip, bi, endpoint, a plug-in with encode_captions), built with the run's settings."""
    settings = ctx.encoder_settings()
    return {encoders.system_name(spec): systems.make_encoder(spec, **settings)
            for spec in ctx.config.encode.encoders if encoders.has_captions(spec)}


def ablation(ctx: StageContext, units: pd.DataFrame, cache: Cache, max_units: int | None = None,
             inject: str | None = None, n_boot: int = 2000, seed: int | None = None,
             visible: pd.DataFrame | None = None, facts: pd.DataFrame | None = None, duals: dict | None = None):
    """The ablation as stage 03 and ``lookalike leak-check`` compute it: encode and index (all units
    or a seeded subset of max_units), query with both sets, pool every index's top leak.pool_depth
    for blind judging, label the pool with the reference labels, and tabulate recall@10 / nDCG@10
    per index × query set. visible, facts: what each page shows (tables/visible.csv, facts.csv), the
    blind queries' source; default the run's tables when present. Returns (ablation, sheet,
    judgements, table, per_query)."""
    cfg = ctx.config
    if inject is None:
        inject = "caption-index" if cfg.leak.inject_caption_leak else ""
    seed = ctx.seed if seed is None else seed
    if visible is None and ctx.has_table("visible"):
        visible = ctx.table("visible")
    if facts is None and ctx.has_table("facts"):
        facts = ctx.table("facts")
    ab = leakage.run_ablation(units, ctx.run_dir, seed, cache, max_units=max_units, inject=inject,
                        ocr_engine=cfg.encode.ocr_engine, workers=cfg.encode.workers,
                        text_source=cfg.encode.text_source,
                        device=cfg.encode.device, n_boot=n_boot,
                        blind_queries=str(P.repo_path(cfg.leak.blind_queries) or ""), page_base=cfg.corpus.page_base,
                        cluster=cfg.stats.cluster, visible=visible, facts=facts,
                        duals=dual_encoders(ctx) if duals is None else duals)
    sheet = leakage.sheet(ab.runs, ab.queries, k=cfg.leak.pool_depth, seed=seed)
    judgements = leakage.reference_labels(sheet, ab.queries, units)
    table, per_query = leakage.ablation_table(ab.runs, ab.queries, leakage.qrels_from_judgements(judgements), seed, n_boot=n_boot,
                                        clusters=ab.clusters)
    return ab, sheet, judgements, table, per_query


def run(ctx: StageContext) -> StageResult:
    """Stage 03, in the order its notebook shows them: injected, matched, overlap, queries, pool, repool,
    ablation, dual, chart, resolution, breakdowns, gate, planted, then the judging sheet and the headline.
    Reads and writes what lookalike.stages.contracts.CONTRACTS["03_leak_ablation"] declares."""
    cfg, res = ctx.config, ctx.result(STAGE, TITLE)
    units = ctx.units()
    cache = Cache(cfg.encode.cache_dir or None)
    ab, sheet, judgements, table, per_query = ablation(ctx, units, cache)
    res.add(*injected_section(ab, sheet, judgements, table, per_query))
    res.add(*matched_section(ab))
    res.add(*overlap_section(ab, units, cfg.seed))
    res.add(*queries_section(ab))
    res.add(*pool_section(sheet, ab, judgements, cfg.leak.pool_depth))
    res.add(*repool_section(cfg.encode.ocr_engine, cfg.encode.workers, cfg.encode.text_source, units, ctx.run_dir, cache, ab,
                            cfg.leak.pool_depth, cfg.seed, judgements))
    res.add(*ablation_section(table, units))
    res.add(*dual_section(ab))
    res.add(*chart_section(table))
    res.add(*resolution_section(table, ab))
    res.add(*breakdowns_section(per_query))
    probes = shuffled_run_probes(cfg, units, ctx.run_dir)
    power = planted_power(ctx, units, cache, ab, cfg.leak.threshold)
    gates, verdict, decision = res.add(*gate_section(per_query, ab, cfg.leak.threshold, cfg.seed,
                                                     ctx.unit_clusters(), cfg.stats.cluster, probes, power))
    leaky = planted_leak(ctx, units, cache, ab, cfg.leak.threshold)
    res.add(*planted_section(gates, leaky))
    res.add(*sheet_section(ab, per_query, sheet, units, cfg.seed, ctx.run_dir, cfg.corpus.source))
    res.add(*headline_section(ab, gates, verdict, decision, table))
    return res


def planted_power(ctx: StageContext, units: pd.DataFrame, cache: Cache, ab, threshold: float,
                  max_units: int | None = None, n_boot: int = 2000, seed: int | None = None, visible=None,
                  facts=None, unit_clusters=None) -> tuple | None:
    """The retrieval test's power on this corpus's own queries: the ablation again with a caption-index
    leak planted (the image index encodes the caption fields), and the image index's paired difference
    with whether the retrieval test alone catches it (L.planted_power). None when the run itself injects
    a leak or the retrieval half has no query pairs."""
    if ab.injected or ab.not_evaluated or not len(ab.queries):
        return None
    seed = ctx.seed if seed is None else seed
    _, _, _, _, planted_pq = ablation(ctx, units, cache, max_units=max_units, inject="caption-index", n_boot=n_boot,
                                      seed=seed, visible=visible, facts=facts, duals={})
    return leakage.planted_power(planted_pq, threshold, n_boot, seed,
                           ctx.unit_clusters() if unit_clusters is None else unit_clusters)


def planted_leak(ctx: StageContext, units: pd.DataFrame, cache: Cache, ab, threshold: float) -> list | None:
    """The gate's verdicts on the planted leak when the corpus plants one (the demo: the same ablation with
    the unit's file name appended to what the pixel systems read), else None."""
    planted = ctx.optional_table("planted")
    if planted is None or not (planted["effect"] == "leaky pixel system").any() or ab.injected:
        return None
    leaky, _, _, _, leaky_pq = ablation(ctx, units, cache, inject="filename", duals={})
    return leakage.gate_results(leaky_pq, leaky.pixel_pq, leaky.probe, threshold, seed=ctx.seed,
                          unit_clusters=ctx.unit_clusters())


def injected_section(ab, sheet: pd.DataFrame, judgements: pd.DataFrame, table: pd.DataFrame,
                     per_query: pd.DataFrame) -> tuple[Section]:
    """The leak ablation as computed (ablation()): whether a leak was injected, and its tables. Writes
    leak_ablation, leak_ablation_systems, leak_queries, leak_per_query, judging_key, judgements."""
    sec = Section(STAGE, "injected")
    sec.say(f"{ab.injected} leak injected" if ab.injected else "clean run: the image index holds pixels-only vectors")
    sec.table("leak_ablation", table, sort_by=["index", "query_set"])
    sec.table("leak_ablation_systems", ab.systems_table, sort_by=["system", "index", "query_set"])
    sec.table("leak_queries", ab.queries, sort_by=["query_id"])
    sec.table("leak_per_query", per_query, sort_by=["index", "query_id"])
    sec.table("judging_key", sheet, sort_by=["item"])
    sec.table("judgements", judgements, sort_by=["query_id", "unit_id"])
    return (sec,)


def matched_section(ab) -> tuple[Section]:
    """The query sets side by side: register and qualifier shares of each (they should be equal)."""
    sec = Section(STAGE, "matched")
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(leakage.matched(ab.queries).to_string(index=False))
    return (sec,)


def overlap_section(ab, units: pd.DataFrame, seed: int) -> tuple[Section, Any]:
    """The share of each query's content words found in its unit's caption fields. Writes leak_caption_overlap."""
    sec = Section(STAGE, "overlap")
    overlap = leakage.caption_overlap(ab.queries, units, ab.clusters, seed)
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say("share of each query's content words found in its unit's caption fields (caption, alt text, "
                "file name) — blind queries are written from what the page shows, caption-derived ones from "
                "the caption:")
        sec.say(overlap.to_string(index=False))
    sec.table("leak_caption_overlap", overlap)
    return sec, overlap


def queries_section(ab) -> tuple[Section]:
    """The blind queries: how many of yours were dropped and why."""
    sec = Section(STAGE, "queries")
    sec.show["queries"] = ab.queries.head(6)[["query_set", "register", "qualifiers", "text"]]
    if ab.dropped is not None and len(ab.dropped):
        sec.say(f"{len(ab.dropped)} of your blind queries dropped (tables/leak_blind_dropped.csv):")
        sec.say(ab.dropped.head(10).to_string(index=False))
    return (sec,)


def pool_section(sheet, ab, judgements: pd.DataFrame, leak_pool_depth) -> tuple[Section, Any]:
    """The judging pool of the ablation: pooled pairs per query and judged@10 per index. Writes judged_10."""
    sec = Section(STAGE, "pool")
    sec.say(f"pooled pairs: {len(sheet)} for {ab.queries['query_id'].nunique()} queries; labels "
          + ", ".join(f"{lab}: {int((judgements['label'] == lab).sum())}" for lab in LABELS)
          + f" (judge: {', '.join(sorted(judgements['judge'].unique()))})")
    judged = leakage.judged_at_k(ab.runs, judgements, leak_pool_depth)
    sec.say(judged.round(3).to_string(index=False))
    sec.table("judged_10", judged, sort_by=["system"])
    return sec, judged


def repool_section(encode_ocr_engine, encode_workers, encode_text_source, units: pd.DataFrame, run_dir: Path, cache, ab, leak_pool_depth,
                   seed: int, judgements: pd.DataFrame) -> tuple[Section]:
    """Re-pooling ocr-bm25 on the same queries: the new pairs it would need judged."""
    sec = Section(STAGE, "repool")

    bm25_units = encoders.make_encoder("ocr-bm25", ocr_engine=encode_ocr_engine, workers=encode_workers,
                                text_source=encode_text_source, progress=False).encode_units(units, run_dir, cache)
    bm25_run = retrieve.BM25Index().add(bm25_units).search(
        encoders.make_encoder("ocr-bm25", progress=False).encode_queries(list(ab.queries["text"]), list(ab.queries["query_id"])),
        k=100)
    new_sheet = leakage.sheet({"ocr-bm25": bm25_run}, ab.queries, k=leak_pool_depth, seed=seed, judged=judgements)
    before = leakage.judged_at_k({"ocr-bm25": bm25_run}, judgements, leak_pool_depth)
    sec.say(f"re-pooling ocr-bm25: {len(new_sheet)} new pairs to judge; its judged_{leak_pool_depth} before: "
          f"{before.iloc[0, 1]:.3f}")
    return (sec,)


def ablation_section(table, units: pd.DataFrame) -> tuple[Section]:
    """The ablation table: recall per index (image, caption, both) for blind and captioned queries."""
    sec = Section(STAGE, "ablation")
    with pd.option_context("display.float_format", "{:.3f}".format):
        sec.say(table.to_string(index=False))
        sec.say()
        sec.say(leakage.ratios(table, chance=min(10, len(units)) / max(1, len(units))).to_string(index=False, na_rep="·"))
    sec.html_table("ablation", table)
    sec.html_table("ablation_ratios", leakage.ratios(table, chance=min(10, len(units)) / max(1, len(units))))
    return (sec,)


def dual_section(ab) -> tuple[Section]:
    """Each dual encoder (one model for pixels, captions and questions) in the ablation, or that none ran."""
    sec = Section(STAGE, "dual")
    dual_table = ab.systems_table
    if len(dual_table):
        sec.say("each dual encoder (one model for page pixels, caption text and questions) gets its own image, "
                "caption and both indexes, queried by the same model; its image index is gated below like the "
                "built-in pixel systems (relevance: the query's target unit)")
        with pd.option_context("display.float_format", "{:.3f}".format):
            sec.say(dual_table.to_string(index=False))
        sec.html_table("ablation_systems", dual_table)
    else:
        sec.say("no dual encoder in this run (clip, bi, endpoint or a plug-in with encode_captions): the ablation "
                "above is the built-in text model's (ocr-minilm for pixels, caption-minilm for captions)")
    for name, why in ab.systems_skipped:
        sec.say(f"{name}: no ablation indexes ({why})")
    return (sec,)


def chart_section(table) -> tuple[Section]:
    """The leak ablation chart: recall@10 per index (image, caption, both) for each query set."""
    sec = Section(STAGE, "chart")
    sec.figure("03_leak_ablation", charts.leak_ablation(table, leakage.QUERY_SETS, leakage.INDEXES))
    return (sec,)


def resolution_section(table, ab) -> tuple[Section]:
    """What the ablation can resolve: its n per set and the standard error of a recall near 0.5."""
    sec = Section(STAGE, "resolution")

    n = int(table["n"].iloc[0]) if len(table) else 0
    img = table[table["index"] == "image"].set_index("query_set")["recall_10"]
    if n:
        sec.say(f"n = {n} queries per set; SE of a recall near 0.5: ±{stats.proportion_se(0.5, n):.3f}; "
                f"smallest resolvable difference: ±{leakage.resolution(n):.3f}")
        sec.say(f"image index: SE blind ±{stats.proportion_se(img['blind'], n):.3f}, caption-derived "
                f"±{stats.proportion_se(img['caption-derived'], n):.3f}")
    else:
        sec.say("no queries, so no resolution: " + (ab.not_evaluated or "no blind / caption-derived pairs"))
    return (sec,)


def breakdowns_section(per_query) -> tuple[Section]:
    """Recall@10 of the ablation by register and by stratum, per index and query set."""
    sec = Section(STAGE, "breakdowns")
    sec.show["by_register"] = leakage.breakdown(per_query, "register").pivot_table(
        index=["index", "register"], columns="query_set", values="recall_10").round(3)
    sec.show["by_stratum"] = leakage.breakdown(per_query, "content_type").pivot_table(
        index=["index", "content_type"], columns="query_set", values="recall_10").round(3)
    return (sec,)


def shuffled_run_probes(cfg, units: pd.DataFrame, run_dir: Path) -> tuple[list, list[str]]:
    """The metadata probe of each run of yours that has a run on the shuffled corpus (leak.shuffled_runs:
    name=path, name one of retrieve.external_runs): stage 02's copy of your run against the shuffled
    one, read the same way. Returns (results, notes in words)."""
    from lookalike import params
    from lookalike.eval import trec
    from lookalike.io import inputs

    results, notes = [], []
    ours = {str(s).partition("=")[0].strip() for s in cfg.retrieve.external_runs}
    for spec in cfg.leak.shuffled_runs:
        name, _, path = (x.strip() for x in str(spec).partition("="))
        if name not in ours:
            raise ValueError(f"leak.shuffled_runs: {name!r} is not one of your runs (retrieve.external_runs: "
                             f"{', '.join(sorted(ours)) or 'none'})")
        original, _ = trec.read_run_file(run_dir / "runs" / f"{name}.run")       # stage 02's canonical copy
        shuffled, skipped = inputs.read_external_run(params.repo_file(path), units["unit_id"], original["query_id"].unique(),
                                                cfg.corpus.page_base)
        if len(skipped):
            notes.append(f"{name}: {len(skipped)} row(s) of the shuffled-corpus run skipped (unknown questions or units)")
        result, said = leakage.run_probe(name, original, shuffled)
        results.append(result)
        notes += said
    return results, notes


def gate_section(per_query: pd.DataFrame, ab, threshold: float, seed: int, unit_clusters,
                 cluster: str, probes: tuple[Sequence, Sequence[str]] = ((), ()), power: tuple | None = None
                 ) -> tuple[Section, list, Any, str]:
    """The leak gate: PASS, LEAK or NOT EVALUATED per pixel system from the paired blind / caption-derived
    differences against leak.threshold (units resampled by their cluster), the image index's with the
    retrieval test's power measured on a planted caption-index leak (power), and for each run of yours
    with a run on the shuffled corpus, its rankings compared (probes). Writes leak_gate."""
    import dataclasses

    sec = Section(STAGE, "gate")
    gates = leakage.gate_results(per_query, ab.pixel_pq, ab.probe, threshold, seed=seed, unit_clusters=unit_clusters)
    gates = [dataclasses.replace(g, planted=power) if g.index == "image" and power is not None else g for g in gates]
    gates += list(probes[0])
    for note in probes[1]:
        sec.say(note)
    verdict = gates[0]
    decision = leakage.overall(gates)
    if ab.not_evaluated:
        sec.say(f"retrieval half not evaluated: {ab.not_evaluated}")
    if decision == "NOT EVALUATED":
        sec.say("NOT EVALUATED: " + (ab.not_evaluated or "no blind / caption-derived query pairs could be built from "
                                     "this corpus (they need caption fields, or your own leak.blind_queries file)"))
    else:
        for g in gates:
            sec.say(g.sentence())
        sec.say(f"decision rule, per pixel system: {verdict.rule}; the gate: {decision}")
    interval = (f"paired bootstrap 95% over units, {cluster}s resampled" if cluster != "none"
                else "paired bootstrap 95% over units")
    sec.table("leak_gate", pd.DataFrame([{"system": g.index, "n_pairs": g.n_pairs, "blind": g.blind,
                                          "caption_derived": g.derived, "difference": g.difference,
                                          "difference_lo": g.lo, "difference_hi": g.hi, "threshold": g.threshold,
                                          "interval": interval, "probe_changed": g.probe_changed,
                                          "probe_units": g.probe_n, "detectable": g.detectable,
                                          "underpowered": g.underpowered if g.n_pairs else "",
                                          "planted_difference": g.planted[0] if g.planted else float("nan"),
                                          "planted_lo": g.planted[1] if g.planted else float("nan"),
                                          "planted_hi": g.planted[2] if g.planted else float("nan"),
                                          "planted_caught": g.planted[3] if g.planted else "",
                                          "verdict": g.verdict} for g in gates]))
    return sec, gates, verdict, decision


def planted_section(gates: list, leaky_gates: list | None) -> tuple[Section]:
    """The planted leak beside the clean systems: every pixel system's verdict, and again with the unit's file
    name appended to its input (the gate must say LEAK for those), or that this corpus plants none. Writes
    leak_planted."""
    sec = Section(STAGE, "planted")
    planted = pd.DataFrame(columns=PLANTED_LEAK_COLUMNS)
    if leaky_gates is not None:
        planted = pd.DataFrame(
            [{"system": g.index, "input": "pixels", "verdict": g.verdict, "probe_changed": g.probe_changed,
              "difference": g.difference} for g in gates]
            + [{"system": f"{g.index}+filename", "input": "pixels + file name", "verdict": g.verdict,
                "probe_changed": g.probe_changed, "difference": g.difference} for g in leaky_gates],
            columns=PLANTED_LEAK_COLUMNS)
        with pd.option_context("display.float_format", "{:+.3f}".format):
            sec.say("the planted leak: every pixel system again with the unit's file name appended to its input")
            sec.say(planted.to_string(index=False))
    else:
        sec.say("no planted leak on this corpus (the demo plants one)")
    sec.table("leak_planted", planted)
    return (sec,)


def sheet_section(ab, per_query: pd.DataFrame, sheet: pd.DataFrame, units: pd.DataFrame, seed: int,
                  run_dir: Path, source: str = "") -> tuple[Section]:
    """The blind judging sheet (html/03_judging_sheet.html, written after the tables: pairs shuffled with a
    salted order, no system names), the breakdowns by register and stratum, and your blind queries the
    ablation dropped. Writes leak_blind_dropped (when any), leak_breakdown_register, leak_breakdown_stratum,
    judging_sheet."""
    sec = Section(STAGE, "sheet")
    if ab.dropped is not None and len(ab.dropped):
        sec.table("leak_blind_dropped", ab.dropped)
    sec.table("leak_breakdown_register", leakage.breakdown(per_query, "register"))
    sec.table("leak_breakdown_stratum", leakage.breakdown(per_query, "content_type"))
    sec.table("judging_sheet", leakage.judge_view(sheet))
    noun = unit_noun(source, units["content_type"] if "content_type" in units.columns else ())
    sec.after_save.append(lambda: leakage.judging_sheet_html(sheet, units, run_dir / "html" / "03_judging_sheet.html",
                                                       run_dir, salt=str(seed), noun=noun))
    return (sec,)


def headline_section(ab, gates: list, verdict, decision: str, table: pd.DataFrame) -> tuple[Section]:
    """What index.html says of stage 03: the gate's decision with the image index's blind and caption-derived
    recall@10 and their paired difference, or why the gate was not evaluated."""
    sec = Section(STAGE, "headline")
    ok, blind, derived = decision != "LEAK", verdict.blind, verdict.derived
    sec.headline(
        (f"Not evaluated: {ab.not_evaluated or 'no blind / caption-derived query pairs could be built from this corpus'}."
         if decision == "NOT EVALUATED" else
         f"{verdict.sentence()} Retrieval half not evaluated: {ab.not_evaluated}." if ab.not_evaluated else
         f"Image index recall@10: blind {blind:.2f}, caption-derived {derived:.2f}, paired difference "
         f"{verdict.difference:+.2f} [{verdict.lo:+.2f}, {verdict.hi:+.2f}] over {verdict.n_pairs} units "
         f"({'LEAK: ' + ', '.join(g.index for g in gates if g.verdict == 'LEAK') if not ok else 'no leak in any pixel system; the retrieval test is underpowered on this corpus, so the metadata probe is the evidence' if verdict.underpowered else 'no leak in any pixel system'}); caption index {table.iloc[2]['recall_10']:.2f} → {table.iloc[3]['recall_10']:.2f}"
         f"{f' — {ab.injected} leak injected' if ab.injected else ''}."),
        figure="03_leak_ablation",
        numbers={f"{r.index} / {r.query_set}": (f"{r.recall_10:.3f} [{r.recall_10_lo:.3f}, {r.recall_10_hi:.3f}]"
                                                 if r.n else "not evaluated: no queries")
                 for r in table.itertuples()},
    )
    return (sec,)
