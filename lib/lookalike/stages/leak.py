"""Stage 03 · leak ablation: does anything text-shaped reach the image path? Image / caption / both
indexes × blind / caption-derived queries, pooled blind judging, the ablation table, resolution,
breakdowns and the gate. `lookalike leak-check` runs the same functions on a sample.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
from lookalike.analysis import leakage as L
from lookalike.io.cache import Cache
from lookalike.retrieval import encoders as E
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import systems
from lookalike.eval import stats
from lookalike.vocab import LABELS

from lookalike.stages.base import StageContext, StageResult, context  # noqa: F401 (context: the notebooks call it)

TITLE = 'Leak ablation'
PLANTED_LEAK_COLUMNS = ["system", "input", "verdict", "probe_changed", "difference"]


def dual_encoders(ctx: StageContext) -> dict:
    """The run's dual encoders (encode.encoders entries that also embed caption text into their query
    space: clip, bi, endpoint, a plug-in with encode_captions), built with the run's settings."""
    settings = ctx.encoder_settings()
    return {E.system_name(spec): systems.make_encoder(spec, **settings)
            for spec in ctx.get("encode.encoders") if E.has_captions(spec)}


def ablation(ctx: StageContext, units: pd.DataFrame, cache: Cache, max_units: int | None = None,
             inject: str | None = None, n_boot: int = 2000, seed: int | None = None,
             visible: pd.DataFrame | None = None, facts: pd.DataFrame | None = None, duals: dict | None = None):
    """The ablation as stage 03 and ``lookalike leak-check`` compute it: encode and index (all units
    or a seeded subset of max_units), query with both sets, pool every index's top leak.pool_depth
    for blind judging, label the pool with the reference labels, and tabulate recall@10 / nDCG@10
    per index × query set. visible, facts: what each page shows (tables/visible.csv, facts.csv), the
    blind queries' source; default the run's tables when present. Returns (ablation, sheet,
    judgements, table, per_query)."""
    if inject is None:
        inject = "caption-index" if ctx.get("leak.inject_caption_leak") else ""
    seed = ctx.seed if seed is None else seed
    if visible is None and ctx.has_table("visible"):
        visible = ctx.table("visible")
    if facts is None and ctx.has_table("facts"):
        facts = ctx.table("facts")
    ab = L.run_ablation(units, ctx.run_dir, seed, cache, max_units=max_units, inject=inject,
                        ocr_engine=ctx.get("encode.ocr_engine"), workers=ctx.get("encode.workers"),
                        device=ctx.get("encode.device"), n_boot=n_boot,
                        blind_queries=str(ctx.path("leak.blind_queries") or ""), page_base=ctx.get("corpus.page_base"),
                        cluster=ctx.get("stats.cluster"), visible=visible, facts=facts,
                        duals=dual_encoders(ctx) if duals is None else duals)
    sheet = L.sheet(ab.runs, ab.queries, k=ctx.get("leak.pool_depth"), seed=seed)
    judgements = L.reference_labels(sheet, ab.queries, units)
    table, per_query = L.ablation_table(ab.runs, ab.queries, L.qrels_from_judgements(judgements), seed, n_boot=n_boot,
                                        clusters=ab.clusters)
    return ab, sheet, judgements, table, per_query


def run(ctx: StageContext) -> StageResult:
    """Stage 03: its sections, in the order it builds them: injected, matched, overlap, queries, pool, repool,
    ablation, dual, chart, resolution, breakdowns, gate, planted. Reads and writes what
    lookalike.stages.contracts.CONTRACTS["03_leak_ablation"] declares."""
    seed = ctx.get('seed')
    encode_ocr_engine = ctx.get('encode.ocr_engine')
    encode_workers = ctx.get('encode.workers')
    encode_cache_dir = ctx.get('encode.cache_dir')
    leak_threshold = ctx.get('leak.threshold')
    leak_pool_depth = ctx.get('leak.pool_depth')
    res = StageResult('03_leak_ablation', TITLE, ctx.run_dir)

    RUN = ctx.run_dir
    units = ctx.units()
    cache = Cache(encode_cache_dir or None)

    res.section("injected")
    ab, sheet, judgements, table, per_query = ablation(ctx, units, cache)
    res.say(f"{ab.injected} leak injected" if ab.injected else "clean run: the image index holds pixels-only vectors")

    res.section("matched")
    with pd.option_context("display.float_format", "{:.3f}".format):
        res.say(L.matched(ab.queries).to_string(index=False))

    res.section("overlap")
    overlap = L.caption_overlap(ab.queries, units, ab.clusters, seed)
    with pd.option_context("display.float_format", "{:.3f}".format):
        res.say("share of each query's content words found in its unit's caption fields (caption, alt text, "
                "file name) — blind queries are written from what the page shows, caption-derived ones from "
                "the caption:")
        res.say(overlap.to_string(index=False))

    res.section("queries")
    res.show["queries"] = ab.queries.head(6)[["query_set", "register", "qualifiers", "text"]]
    if ab.dropped is not None and len(ab.dropped):
        res.say(f"{len(ab.dropped)} of your blind queries dropped (tables/leak_blind_dropped.csv):")
        res.say(ab.dropped.head(10).to_string(index=False))

    res.section("pool")
    res.say(f"pooled pairs: {len(sheet)} for {ab.queries['query_id'].nunique()} queries; labels "
          + ", ".join(f"{lab}: {int((judgements['label'] == lab).sum())}" for lab in LABELS)
          + f" (judge: {', '.join(sorted(judgements['judge'].unique()))})")
    judged = L.judged_at_k(ab.runs, judgements, leak_pool_depth)
    res.say(judged.round(3).to_string(index=False))

    res.section("repool")

    bm25_units = E.make_encoder("ocr-bm25", ocr_engine=encode_ocr_engine, workers=encode_workers,
                                progress=False).encode_units(units, RUN, cache)
    bm25_run = retrieve.BM25Index().add(bm25_units).search(
        E.make_encoder("ocr-bm25", progress=False).encode_queries(list(ab.queries["text"]), list(ab.queries["query_id"])),
        k=100)
    new_sheet = L.sheet({"ocr-bm25": bm25_run}, ab.queries, k=leak_pool_depth, seed=seed, judged=judgements)
    before = L.judged_at_k({"ocr-bm25": bm25_run}, judgements, leak_pool_depth)
    res.say(f"re-pooling ocr-bm25: {len(new_sheet)} new pairs to judge; its judged_{leak_pool_depth} before: "
          f"{before.iloc[0, 1]:.3f}")

    res.section("ablation")
    with pd.option_context("display.float_format", "{:.3f}".format):
        res.say(table.to_string(index=False))
        res.say()
        res.say(L.ratios(table, chance=min(10, len(units)) / max(1, len(units))).to_string(index=False, na_rep="·"))
    res.html_table("ablation", table)
    res.html_table("ablation_ratios", L.ratios(table, chance=min(10, len(units)) / max(1, len(units))))

    res.section("dual")
    dual_table = ab.systems_table
    if len(dual_table):
        res.say("each dual encoder (one model for page pixels, caption text and questions) gets its own image, "
                "caption and both indexes, queried by the same model; its image index is gated below like the "
                "built-in pixel systems (relevance: the query's target unit)")
        with pd.option_context("display.float_format", "{:.3f}".format):
            res.say(dual_table.to_string(index=False))
        res.html_table("ablation_systems", dual_table)
    else:
        res.say("no dual encoder in this run (clip, bi, endpoint or a plug-in with encode_captions): the ablation "
                "above is the built-in text model's (ocr-minilm for pixels, caption-minilm for captions)")
    for name, why in ab.systems_skipped:
        res.say(f"{name}: no ablation indexes ({why})")

    res.section("chart")
    bars = alt.Chart(table).mark_bar().encode(
        x=alt.X("query_set:N", title=None, sort=list(L.QUERY_SETS)),
        y=alt.Y("recall_10:Q", title="Recall@10", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("query_set:N", sort=list(L.QUERY_SETS), title="query set"))
    rules = alt.Chart(table).mark_rule().encode(x=alt.X("query_set:N", sort=list(L.QUERY_SETS)),
                                                 y="recall_10_lo:Q", y2="recall_10_hi:Q")
    chart = (bars + rules).properties(width=140, height=220).facet(
        column=alt.Column("index:N", sort=list(L.INDEXES), title="index")).properties(
        title="Leak ablation: read each index's two columns side by side")
    res.figure("03_leak_ablation", chart)

    res.section("resolution")

    n = int(table["n"].iloc[0]) if len(table) else 0
    img = table[table["index"] == "image"].set_index("query_set")["recall_10"]
    if n:
        res.say(f"n = {n} queries per set; SE of a recall near 0.5: ±{stats.proportion_se(0.5, n):.3f}; "
                f"smallest resolvable difference: ±{L.resolution(n):.3f}")
        res.say(f"image index: SE blind ±{stats.proportion_se(img['blind'], n):.3f}, caption-derived "
                f"±{stats.proportion_se(img['caption-derived'], n):.3f}")
    else:
        res.say("no queries, so no resolution: " + (ab.not_evaluated or "no blind / caption-derived pairs"))

    res.section("breakdowns")
    res.show["by_register"] = L.breakdown(per_query, "register").pivot_table(
        index=["index", "register"], columns="query_set", values="recall_10").round(3)
    res.show["by_stratum"] = L.breakdown(per_query, "content_type").pivot_table(
        index=["index", "content_type"], columns="query_set", values="recall_10").round(3)

    res.section("gate")
    gates = L.gate_results(per_query, ab.pixel_pq, ab.probe, leak_threshold, seed=seed,
                           unit_clusters=ctx.unit_clusters())
    verdict = gates[0]
    decision = L.overall(gates)
    ok, blind, derived = decision != "LEAK", verdict.blind, verdict.derived
    if ab.not_evaluated:
        res.say(f"retrieval half not evaluated: {ab.not_evaluated}")
    if decision == "NOT EVALUATED":
        res.say("NOT EVALUATED: " + (ab.not_evaluated or "no blind / caption-derived query pairs could be built from "
                                     "this corpus (they need caption fields, or your own leak.blind_queries file)"))
    else:
        for g in gates:
            res.say(g.sentence())
        res.say(f"decision rule, per pixel system: {verdict.rule}; the gate: {decision}")

    res.section("planted")
    planted = pd.DataFrame(columns=PLANTED_LEAK_COLUMNS)
    if ctx.has_table("planted") and (ctx.table("planted")["effect"] == "leaky pixel system").any() and not ab.injected:
        # the demo plants a leaky pixel system: the same ablation with the file name appended to what the pixel
        # systems read; the gate must say LEAK for it (and said PASS above for the clean ones)
        leaky, _, _, _, leaky_pq = ablation(ctx, units, cache, inject="filename", duals={})
        leaky_gates = L.gate_results(leaky_pq, leaky.pixel_pq, leaky.probe, leak_threshold, seed=seed,
                                     unit_clusters=ctx.unit_clusters())
        planted = pd.DataFrame(
            [{"system": g.index, "input": "pixels", "verdict": g.verdict, "probe_changed": g.probe_changed,
              "difference": g.difference} for g in gates]
            + [{"system": f"{g.index}+filename", "input": "pixels + file name", "verdict": g.verdict,
                "probe_changed": g.probe_changed, "difference": g.difference} for g in leaky_gates],
            columns=PLANTED_LEAK_COLUMNS)
        with pd.option_context("display.float_format", "{:+.3f}".format):
            res.say("the planted leak: every pixel system again with the unit's file name appended to its input")
            res.say(planted.to_string(index=False))
    else:
        res.say("no planted leak on this corpus (the demo plants one)")

    # save
    res.table("leak_planted", planted)
    res.table("leak_ablation", table, sort_by=["index", "query_set"])
    res.table("leak_ablation_systems", ab.systems_table, sort_by=["system", "index", "query_set"])
    res.table("leak_queries", ab.queries, sort_by=["query_id"])
    res.table("leak_caption_overlap", overlap)
    if ab.dropped is not None and len(ab.dropped):
        res.table("leak_blind_dropped", ab.dropped)
    res.table("leak_per_query", per_query, sort_by=["index", "query_id"])
    res.table("leak_breakdown_register", L.breakdown(per_query, "register"))
    res.table("leak_breakdown_stratum", L.breakdown(per_query, "content_type"))
    res.table("judging_sheet", L.judge_view(sheet))
    res.table("judging_key", sheet, sort_by=["item"])
    res.table("judgements", judgements, sort_by=["query_id", "unit_id"])
    res.table("judged_10", judged, sort_by=["system"])
    res.table("leak_gate", pd.DataFrame([{"system": g.index, "n_pairs": g.n_pairs, "blind": g.blind,
                                          "caption_derived": g.derived, "difference": g.difference,
                                          "difference_lo": g.lo, "difference_hi": g.hi, "threshold": g.threshold,
                                          "interval": f"paired bootstrap 95% over units, "
                                                      f"{ctx.get('stats.cluster')}s resampled"
                                                      if ctx.get("stats.cluster") != "none" else
                                                      "paired bootstrap 95% over units",
                                          "probe_changed": g.probe_changed, "probe_units": g.probe_n,
                                          "verdict": g.verdict} for g in gates]))
    L.judging_sheet_html(sheet, units, RUN / "html" / "03_judging_sheet.html", RUN, salt=str(seed))
    res.headline(
        (f"Not evaluated: {ab.not_evaluated or 'no blind / caption-derived query pairs could be built from this corpus'}."
         if decision == "NOT EVALUATED" else
         f"{verdict.sentence()} Retrieval half not evaluated: {ab.not_evaluated}." if ab.not_evaluated else
         f"Image index recall@10: blind {blind:.2f}, caption-derived {derived:.2f}, paired difference "
         f"{verdict.difference:+.2f} [{verdict.lo:+.2f}, {verdict.hi:+.2f}] over {verdict.n_pairs} units "
         f"({'no leak in any pixel system' if ok else 'LEAK: ' + ', '.join(g.index for g in gates if g.verdict == 'LEAK')}); caption index {table.iloc[2]['recall_10']:.2f} → {table.iloc[3]['recall_10']:.2f}"
         f"{f' — {ab.injected} leak injected' if ab.injected else ''}."),
        figure="03_leak_ablation",
        numbers={f"{r.index} / {r.query_set}": (f"{r.recall_10:.3f} [{r.recall_10_lo:.3f}, {r.recall_10_hi:.3f}]"
                                                 if r.n else "not evaluated: no queries")
                 for r in table.itertuples()},
    )
    return res

