"""``lookalike eval QRELS RUN [RUN ...]``: trec_eval-compatible evaluation from the command line.

Output lines are trec_eval's: ``measure<TAB>query_or_all<TAB>value`` (measure left-justified to 22
characters, values with 4 decimals, counts as integers). With the default measures and no extra
options the output is line-for-line trec_eval's default output for the measures it prints.

Extras: ``--group-by FILE:COLUMN`` prints one block per group (the group's name in the second
column, its num_q first) and a ``macro`` block (equal weight per group) after the ``all`` block;
``--ci`` appends two columns, the bootstrap 95% CI of the mean (per group too).

Several runs: one comparison table (lookalike.compare): each run's mean with its bootstrap 95% CI on
the queries every run was scored on, the paired difference from the baseline (``--baseline``, default
the first run) with its CI, the paired randomisation test's p-value adjusted by Holm over the runs on
each measure, and the queries won, tied and lost against the baseline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from lookalike.cli import options
from lookalike.eval import measures as measures_mod
from lookalike.eval import metrics
from lookalike.eval import ranking, stats, trec
from lookalike.io import pagebase


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lookalike eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("qrels", help="TREC qrels file: query_id iteration unit_id relevance")
    p.add_argument("run", nargs="+", help="TREC run file: query_id Q0 unit_id rank score tag; several runs are "
                                          "compared (paired tests against --baseline, Holm over the runs)")
    p.add_argument("--baseline", metavar="NAME", help="with several runs: the run the others are compared with "
                                                        "(its tag, or its file name; default the first run)")
    p.add_argument("-m", dest="measures", action="append", metavar="MEASURE",
                   help="measure, repeatable; trec_eval, ir_measures and ranx spellings work (P.5,10  ndcg_cut.10  "
                        "nDCG@10  'nDCG@10 P@5 RR'  P(rel=2)@5  ndcg@10  map@100  mrr  hit_rate@5  official)")
    p.add_argument("-q", action="store_true", help="print per-query values too")
    p.add_argument("-c", action="store_true", help="average over every qrels query (missing ones score 0)")
    p.add_argument("-l", type=int, default=1, metavar="LEVEL", help="smallest grade counted relevant (default 1)")
    p.add_argument("-M", type=options.whole(0), default=None, metavar="N", help="use only the top N units of each ranking")
    p.add_argument("-J", action="store_true", help="judged units only: drop unjudged units from each ranking first "
                                                   "(trec_eval -J)")
    p.add_argument("-N", type=options.whole(0), default=0, metavar="N",
                   help="the collection's size, for utility's fourth coefficient (default 0, as trec_eval)")
    p.add_argument("--group-by", metavar="FILE:COLUMN",
                   help="table (csv/tsv/parquet) with query_id and COLUMN: per-group and macro blocks")
    p.add_argument("--ci", action="store_true", help="append the bootstrap 95%% CI of each mean")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples for --ci (default 2000)")
    p.add_argument("--seed", type=options.whole(0), default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--format", choices=("text", "json", "csv"), default="text",
                   help="text: trec_eval's lines (default); csv: measure,query,value[,ci_lo,ci_hi] at full "
                        "precision; json: the same rows in one object with the run's id")
    return p


def _read_groups(spec: str) -> tuple[pd.Series, str]:
    path, sep, column = spec.rpartition(":")
    if not sep or not path:
        raise trec.TrecFormatError(f"--group-by {spec!r}: expected FILE:COLUMN")
    p = Path(path)
    if not p.is_file():
        raise trec.TrecFormatError(f"{p}: group file not found")
    if p.suffix == ".parquet":
        df = pd.read_parquet(p)
    else:
        df = pd.read_csv(p, sep="\t" if p.suffix in (".tsv", ".tab") else ",", dtype=str, keep_default_na=False)
    for col in ("query_id", column):
        if col not in df.columns:
            raise trec.TrecFormatError(f"{p}: column {col!r} is missing (columns: {', '.join(map(str, df.columns))})")
    dup = df["query_id"].duplicated()
    if dup.any():
        raise trec.TrecFormatError(f"{p}: query {df['query_id'][dup].iloc[0]!r} appears twice")
    return df.set_index("query_id")[column].astype(str), column


def _line(measure: str, qid: str, value, ci: tuple[float, float] | None = None) -> dict:
    """One output row: measure, query (or all / a group / macro), value and, with --ci, its interval."""
    row = {"measure": measure, "query": qid, "value": value}
    if ci is not None:
        row.update(ci_lo=ci[0], ci_hi=ci[1])
    return row


def _text(row: dict) -> str:
    value = row["value"]
    value = str(value) if isinstance(value, (str, int)) else metrics.format_value(row["measure"], value)
    text = f"{row['measure']:<22}\t{row['query']}\t{value}"
    if "ci_lo" in row:
        text += f"\t{row['ci_lo']:.4f}\t{row['ci_hi']:.4f}"
    return text


def _render(rows: list[dict], how: str, runid: str) -> str:
    """The rows as trec_eval's text lines, a CSV table or one JSON object (values at full precision)."""
    if how == "text":
        return "\n".join(_text(r) for r in rows)
    numeric = [r for r in rows if r["measure"] != "runid"]
    if how == "json":
        import json

        clean = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in numeric]
        return json.dumps({"runid": runid, "rows": clean}, indent=1)
    columns = ["measure", "query", "value"] + (["ci_lo", "ci_hi"] if any("ci_lo" in r for r in numeric) else [])
    return pd.DataFrame(numeric, columns=columns).to_csv(index=False, lineterminator="\n").rstrip("\n")


def _block(per_query: pd.DataFrame, measures: list[str], label: str, args, runid: str | None) -> list[dict]:
    lines = []
    if runid is not None:
        lines.append(_line("runid", label, runid))
    means = metrics.aggregate_values(per_query, measures)
    for m in measures:
        ci = None
        if args.ci and measures_mod.parse_one(m).aggregation == "mean":
            iv = stats.bootstrap_ci(per_query[m].to_numpy(), args.n_boot, rng=args.seed)
            ci = (iv.lo, iv.hi)
        lines.append(_line(m, label, float(means[m]), ci))
    return lines


def page_base_note(judged_ids, ranked_ids) -> str:
    """A warning when the qrels and the run seem to count pages from different bases: only where the ids
    disagree — one side uses page 0 and the other never does — and fewer judged 'doc:page' ids appear in
    the run as written than would with every page moved by one. (Two files that count alike, a run's own
    runs/ and qrels/ among them, are never warned about, however low the recall.) The scores are computed
    on the ids as written either way; this only says why they may be low."""
    judged, ranked = set(map(str, judged_ids)), set(map(str, ranked_ids))
    pages = [p for p in map(pagebase.split, judged) if p]
    paged = [u for u in judged if pagebase.split(u)]
    if not paged:
        return ""
    zero_judged = any(p[1] == 0 for p in pages)
    zero_ranked = any(p[1] == 0 for p in map(pagebase.split, ranked) if p)
    if zero_judged == zero_ranked:
        return ""
    as_written = len(judged & ranked)
    by, words = (1, "the qrels from 0 and the run from 1") if zero_judged else (-1, "the qrels from 1 and the run from 0")
    moved = sum(pagebase.shift(u, by) in ranked for u in paged)
    if moved > as_written and moved >= max(1, len(paged) // 2):
        return (f"{as_written} of {len(judged)} judged units appear in the run as written, {moved} with every "
                f"judged page moved by {by:+d}: the files seem to count pages differently ({words}); the "
                "scores below use the ids as written")
    return ""


def main(argv: list[str] | None = None) -> int:
    """``lookalike eval``: trec_eval's command line (and its dialects) over qrels and run files; returns the exit
    status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.n_boot < stats.MIN_RESAMPLES:
        parser.error(f"--n-boot must be at least {stats.MIN_RESAMPLES} (resamples of the bootstrap), got {args.n_boot}: "
                     "with fewer, a 95% interval's ends rest on a handful of draws")
    if args.M is not None and args.M < 1:
        parser.error(f"-M must be at least 1 (units kept per ranking), got {args.M}")
    if args.measures:
        args.measures, dropped = measures_mod.first_parameters(args.measures)
        for note in dropped:
            print(f"lookalike eval: {note}", file=sys.stderr)
    if len(args.run) > 1:
        return _compare(parser, args)
    args.run = args.run[0]
    try:
        # trec_eval prints its measures in its own table order, whatever the command line's order
        measures = [str(m) for m in measures_mod.trec_order(measures_mod.parse(args.measures or metrics.TREC_DEFAULT))]
        # trec_eval prints the run's tag with its default set and with all_trec, not with chosen measures
        default = not args.measures or any(str(m).strip() in ("all_trec", "official", "trec") for m in args.measures)
        qrels = ranking.Qrels.read(args.qrels)
        run = ranking.Run.read(args.run)
        ev = metrics.evaluate(qrels, run, measures, level=args.l, complete=args.c, max_docs=args.M, num_docs=args.N,
                        judged_only=args.J)
        if ev.per_query.empty:
            print(f"lookalike eval: {ev.empty_reason}; nothing to print (trec_eval 10.0 refuses too)", file=sys.stderr)
            return 2
        groups = _read_groups(args.group_by) if args.group_by else None
    except (trec.TrecFormatError, metrics.MeasureError) as exc:
        print(f"lookalike eval: {exc}", file=sys.stderr)
        return 2
    out: list[dict] = []
    # as trec_eval: counts of queries and geometric means are properties of the set, not of one query
    per_query_measures = [m for m in measures if measures_mod.parse_one(m).aggregation not in ("count", "gmean")]
    numeric = [m for m in measures if m not in ev.text]          # text (relstring) prints per query only
    if args.q:
        for qid, row in ev.per_query.iterrows():
            out.extend(_line(m, str(qid), ev.text[m][qid] if m in ev.text else float(row[m]))
                       for m in per_query_measures)
    out.extend(_block(ev.per_query, numeric, "all", args, run.name if default else None))
    if groups is not None:
        g, column = groups
        missing = [q for q in ev.per_query.index if q not in g.index]
        if missing:
            print(f"lookalike eval: {args.group_by}: no {column} for {len(missing)} evaluated queries, e.g. "
                  f"{', '.join(missing[:5])}", file=sys.stderr)
            return 2
        table = ev.by_group(g, name=column)
        for key in sorted(table.loc[table["aggregate"] == "group", column].unique()):
            part = ev.per_query[g.reindex(ev.per_query.index).to_numpy() == key]
            out.append(_line("num_q", key, float(len(part))))
            out.extend(_block(part, [m for m in numeric if m != "num_q"], key, args, None))
        macro = table[table["aggregate"] == "macro"].set_index("measure")
        out.append(_line("num_groups", "macro", int(macro["n"].iloc[0])))
        out.extend(_line(m, "macro", float(macro.loc[m, "value"])) for m in numeric
                   if not measures_mod.parse_one(m).integer)
    print(_render(out, args.format, run.name))
    notes = []
    base_note = page_base_note(qrels.unit_ids, run.vocab)
    if base_note:
        notes.append(base_note)
    if ev.run_only_queries:
        notes.append(f"{len(ev.run_only_queries)} run queries are not in the qrels and were not scored: "
                     f"{', '.join(ev.run_only_queries[:10])}{' ...' if len(ev.run_only_queries) > 10 else ''}")
    if ev.missing_from_run:
        how = "scored as empty rankings (-c)" if args.c else "left out of the means (use -c to count them as 0)"
        notes.append(f"{len(ev.missing_from_run)} qrels queries are missing from the run, {how}: "
                     f"{', '.join(ev.missing_from_run[:10])}{' ...' if len(ev.missing_from_run) > 10 else ''}")
    if ev.no_relevant_queries:
        notes.append(f"{len(ev.no_relevant_queries)} evaluated queries have no relevant unit at level {args.l} "
                     f"(their recall, map, nDCG are 0, as in trec_eval): "
                     f"{', '.join(ev.no_relevant_queries[:10])}{' ...' if len(ev.no_relevant_queries) > 10 else ''}")
    for note in notes:
        print(f"lookalike eval: note: {note}", file=sys.stderr)
    return 0


def _compare(parser: argparse.ArgumentParser, args) -> int:
    """Several runs: the comparison Report, as text, CSV (full precision) or JSON."""
    from lookalike.eval import compare

    refused = [flag for flag, on in (("-q", args.q), ("--group-by", args.group_by), ("-M", args.M is not None))
               if on]
    if refused:
        parser.error(f"{', '.join(refused)} print one run's lines; with several runs lookalike eval prints one "
                     "comparison table (evaluate the runs one at a time for these)")
    try:
        qrels = ranking.Qrels.read(args.qrels)
        runs: dict[str, ranking.Run] = {}
        for path in args.run:
            run = ranking.Run.read(path)
            name = run.name if run.name not in runs else Path(path).name
            if name in runs:
                raise ValueError(f"{path}: a run named {name!r} is already given")
            runs[name] = run
        baseline = args.baseline
        if baseline is not None and baseline not in runs:
            by_file = {Path(p).name: n for p, n in zip(args.run, runs)}
            if baseline not in by_file:
                raise ValueError(f"--baseline {baseline!r} is none of the runs: {', '.join(runs)}")
            baseline = by_file[baseline]
        report = compare.compare(qrels, runs, args.measures, baseline, level=args.l, complete=args.c,
                           n_boot=args.n_boot, seed=args.seed)
    except (trec.TrecFormatError, metrics.MeasureError, ValueError) as exc:
        print(f"lookalike eval: {exc}", file=sys.stderr)
        return 2
    if args.format == "csv":
        print(report.table.to_csv(index=False, lineterminator="\n").rstrip("\n"))
    elif args.format == "json":
        print(report.to_json())
    else:
        print(report)
    return 0
