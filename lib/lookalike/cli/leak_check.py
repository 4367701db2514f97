"""``lookalike leak-check PARAMS.yaml``: the leak ablation's CI gate.

Exit 0: no leak found; 1: a leak; 2: bad parameters; 3: not evaluated (no query pairs could be
built, so nothing was measured — never reported as a leak or as a pass).

It runs stage 03's own ablation (lookalike.stages.leak_ablation.ablation: the same indexes, query sets,
pooled blind judging and table) on a seeded sample of leak.gate_units units, in a temporary run
folder, and applies the same gate to every pixel system (lookalike.analysis.leakage.paired_gate):
the metadata probe — the system's own input path run again with the caption fields shuffled among
units; any change is a leak — and the per-unit paired difference, caption-derived − blind
recall@10, with a paired bootstrap CI. The probe needs the system's input path, so it covers the
built-in encoders. For a retriever of yours that enters as a run file, ``--shuffled-corpus OUT``
writes the corpus with every unit's file name, alt text and caption moved to another unit (its
pixels its own): run your retriever on it with the same questions and bring that run as
``leak.shuffled_runs: ["name=path"]``; stage 03 compares it with your run, and any ranking that
changes is a LEAK.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from pathlib import Path

from lookalike import params
from lookalike.cli import options
from lookalike.analysis import leakage
from lookalike.eval import stats
from lookalike.io.cache import Cache
from lookalike.stages import context, leak_ablation, stratify_corpus


PASS, LEAK, BAD_PARAMS, NOT_EVALUATED = 0, 1, 2, 3


def run_gate(prm: dict, inject: str = "", seed: int | None = None, threshold: float | None = None,
             cache: Cache | None = None, n_boot: int = 2000, run_dir: Path | None = None, corpus=None,
             measure_power: bool = False):
    """(gate results — the image index first, then the other pixel systems —, ablation table, units
    read) for checked params: stage 03's ablation on a seeded
    sample of leak.gate_units units, then ``paired_gate`` on the image index. seed: the gate's own
    seed (unit sample, query sets, bootstrap); default the run seed. run_dir and corpus: a run folder
    that already holds the corpus (as stratify_corpus.load_corpus read it into that folder), to gate
    several times without reading it again; default a folder in the cache named after the run,
    where PDF renders are kept between calls (a changed file or dpi renders afresh). measure_power:
    when the image index passes, run the ablation again with a caption-index leak planted and state
    whether its retrieval test catches it (stage 03's planted_power)."""
    threshold = prm["leak"]["threshold"] if threshold is None else threshold
    cache = cache or Cache(prm["encode"]["cache_dir"] or None)
    # the corpus is read into a folder kept in the cache (one per run name), so rendered PDF pages —
    # named by the file's content and the dpi — are rendered once, not on every call
    keep = run_dir or cache.root / "leak-check" / re.sub(r"[^A-Za-z0-9._-]+", "_", str(prm["run"]))
    ctx = context(Path(keep), prm)
    if corpus is None:
        corpus = stratify_corpus.load_corpus(ctx)      # what stage 01 reads: dpi, pages, max_pages, name_pattern ...
    ab, _, _, table, per_query = leak_ablation.ablation(ctx, corpus.units, cache, max_units=prm["leak"]["gate_units"],
                                               inject=inject, n_boot=n_boot, seed=seed, visible=corpus.visible,
                                               facts=corpus.facts)
    unit_clusters = stats.unit_clusters(corpus.units, prm["stats"]["cluster"])
    seed = ctx.seed if seed is None else seed
    table.attrs["not_evaluated"] = ab.not_evaluated     # why the retrieval half has no queries, if it has none
    results = leakage.gate_results(per_query, ab.pixel_pq, ab.probe, threshold, n_boot, seed, unit_clusters)
    if measure_power and results[0].index == "image" and results[0].verdict == "PASS":
        power = leak_ablation.planted_power(ctx, corpus.units, cache, ab, threshold, max_units=prm["leak"]["gate_units"],
                                   n_boot=n_boot, seed=seed, visible=corpus.visible, facts=corpus.facts,
                                   unit_clusters=unit_clusters)
        if power is not None:
            results[0] = dataclasses.replace(results[0], planted=power)
    return results, table, len(corpus.units)


def write_shuffled_corpus(prm: dict, out: Path) -> int:
    """The corpus as stage 01 reads it, each unit's caption fields moved to another unit
    (``shuffled_metadata``: seeded by the run seed, no unit keeps its own), written as out/manifest.csv
    (unit_id, doc_id, page, image_path — absolute —, filename, alt_text, caption) with a README.
    A folder that exists and is not empty is refused: nothing of yours is written over; one that cannot be
    written is refused before the corpus is read."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"lookalike leak-check: {out} exists and is not an empty folder; give a new folder (nothing was written)")
        return BAD_PARAMS
    made = not out.exists()
    try:                    # a folder that cannot be written is said before the corpus is read, not after
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        print(f"lookalike leak-check: cannot write {out} ({exc.strerror or exc}); give a folder you can write "
              "(nothing was written)")
        return BAD_PARAMS
    try:
        return _write_shuffled(prm, out)
    except OSError as exc:
        print(f"lookalike leak-check: writing {out} failed ({exc.strerror or exc}); what was written there is removed")
        for leftover in ("manifest.csv", "README.md"):
            (out / leftover).unlink(missing_ok=True)
        if made:
            out.rmdir()
        return BAD_PARAMS


def _write_shuffled(prm: dict, out: Path) -> int:
    """write_shuffled_corpus's work, once out is known to be an empty folder it can write."""
    import pandas as pd

    from lookalike.data.schema import CAPTION_COLUMNS, resolve_image

    cache = Cache(prm["encode"]["cache_dir"] or None)
    keep = cache.root / "leak-check" / re.sub(r"[^A-Za-z0-9._-]+", "_", str(prm["run"]))
    ctx = context(keep, prm)
    units = stratify_corpus.load_corpus(ctx).units
    fields = [c for c in CAPTION_COLUMNS if c in units.columns]
    if len(units) < 2 or not fields:
        print(f"lookalike leak-check: the corpus has {len(units)} unit(s) and caption fields "
              f"{', '.join(fields) or 'none'}: there is nothing to shuffle, so no probe can be made")
        return NOT_EVALUATED
    shuffled = leakage.shuffled_metadata(units, int(prm["seed"]))
    frame = pd.DataFrame({"unit_id": shuffled["unit_id"],
                          **{c: shuffled[c] for c in ("doc_id", "page") if c in shuffled.columns},
                          "image_path": [str(resolve_image(str(p), keep).resolve()) for p in units["image_path"]],
                          **{c: shuffled[c] for c in fields}})
    frame.to_csv(out / "manifest.csv", index=False)
    moved = int(sum((units[c].astype(str).to_numpy() != shuffled[c].astype(str).to_numpy()).any()
                    for c in fields))
    (out / "README.md").write_text(
        "# The corpus with its caption fields shuffled\n\n"
        f"Written by `lookalike leak-check --shuffled-corpus` for run `{prm['run']}` (seed {prm['seed']}): "
        f"{len(frame)} units, each with its own image and another unit's {', '.join(fields)}.\n\n"
        "Run your retriever on `manifest.csv` exactly as on the real corpus, with the same questions, and write "
        "its run in TREC format with these unit ids. Then add to your params:\n\n"
        "```yaml\nleak:\n  shuffled_runs: [\"<your run's name in retrieve.external_runs>=path/to/that.run\"]\n```\n\n"
        "Stage 03 compares the two runs: a retriever that reads only pixels ranks both the same; any question "
        "whose top 10 changes means the file names, alt text or captions reach it (LEAK).\n", encoding="utf-8")
    print(f"leak-check: {out / 'manifest.csv'}: {len(frame)} units, their {', '.join(fields)} shuffled among them "
          f"({moved} field(s) differ from the corpus); run your retriever on it and set leak.shuffled_runs")
    return PASS


def main(argv: list[str] | None = None) -> int:
    """``lookalike leak-check PARAMS``: the leak gate on a seeded sample of units; exit 0 pass, 1 leak,
    2 bad parameters, 3 not evaluated."""
    ap = argparse.ArgumentParser(prog="lookalike leak-check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("params", help="run parameter file (deep-merged over params/base.yaml)")
    ap.add_argument("--inject-leak", choices=list(leakage.INJECTIONS), default=None,
                    help="fault injection: caption-index (the image path encodes the caption fields instead of the "
                         "pixels), or caption / filename / alt-text appended to what the image path reads")
    ap.add_argument("--inject-caption-leak", action="store_true",
                    help="the same as --inject-leak caption-index (its meaning before the partial injections)")
    ap.add_argument("--threshold", type=options.number(low=0, high=1), default=None, help="override leak.threshold")
    ap.add_argument("--shuffled-corpus", metavar="OUT", default=None,
                    help="write the corpus with the caption fields shuffled among units to the new folder OUT (a "
                         "manifest.csv of every unit's image and its shuffled file name, alt text and caption), for "
                         "your own retriever's run; then set leak.shuffled_runs")
    args = ap.parse_args(argv)
    try:
        prm = params.load_params(args.params)
    except params.ParamsError as exc:
        print(f"lookalike leak-check: {exc}")
        return BAD_PARAMS
    if args.shuffled_corpus:
        return write_shuffled_corpus(prm, Path(args.shuffled_corpus))
    inject = args.inject_leak or ("caption-index" if args.inject_caption_leak or prm["leak"]["inject_caption_leak"]
                                  else "")
    results, table, n_units = run_gate(prm, inject, threshold=args.threshold, measure_power=True)
    decision = leakage.overall(results)
    print(f"leak-check: {min(n_units, prm['leak']['gate_units'])} units, {results[0].n_pairs} paired units"
          f"{f' ({inject} leak injected)' if inject else ''}")
    shown = table[["index", "query_set", "n", "recall_10", "recall_10_lo", "recall_10_hi"]]
    measured = shown[shown["n"].astype(float) > 0]
    if len(measured):
        # a row over no query has no recall: it is said in words below, never printed as NaN
        print(measured.round(3).to_string(index=False))
    if len(measured) < len(shown):
        print("not measured (no query pairs): " + ", ".join(
            f"{r['index']} index, {r['query_set']} queries" for r in shown[shown["n"].astype(float) <= 0].to_dict("records")))
    for result in results:
        print(result.sentence())
    print(f"decision rule, per pixel system: {results[0].rule}; LEAK when any pixel system leaks")
    why = table.attrs.get("not_evaluated", "")
    if why and decision != "NOT EVALUATED":
        print(f"retrieval half not evaluated: {why}; the verdict rests on the metadata probe alone")
    if decision == "NOT EVALUATED":
        print("NOT EVALUATED: " + (why or "no blind / caption-derived query pairs could be built from this corpus "
                                   "(they need caption fields, or your own leak.blind_queries file)")
              + ". Exit 3: the gate did not run.")
        return NOT_EVALUATED
    if decision == "LEAK":
        leaky = [r for r in results if r.verdict == "LEAK"]
        probed = [r.index for r in leaky if r.probe_changed > 0]
        print("FAIL: something text-shaped (captions, file names, alt text) reaches the image path: "
              + "; ".join(filter(None, [
                  f"the input of {', '.join(probed)} changes when the caption fields are shuffled among units"
                  if probed else "",
                  f"{', '.join(r.index for r in leaky if r.probe_changed <= 0)} scores materially higher on "
                  "caption-derived queries than on blind ones" if any(r.probe_changed <= 0 for r in leaky) else ""]))
              + ".")
        return LEAK
    print("PASS: no pixel system's input changes when the caption fields are shuffled, and none favours "
          "caption-derived queries materially and significantly"
          + ("; the retrieval test is underpowered on this corpus, so the metadata probe is the evidence"
             if results[0].underpowered else "") + ".")
    return PASS
