"""Benchmark: lookalike.metrics against pytrec_eval, ranx and ir_measures on one synthetic run.

    python benchmarks/metrics.py [--queries 100000] [--depth 100] [--vocabulary 0] [--peers pytrec_eval,ranx,ir_measures] [--repeat 3]
    python benchmarks/metrics.py --from-files [--queries 100000] [--repeat 3]
    python benchmarks/metrics.py --dicts [--queries 5000] [--repeat 5]

--dicts times lookalike against pytrec_eval from Python dicts at two sizes of the unit vocabulary in
one process: 5,000 distinct unit ids and 393,000 (the largest visual-document collection's page
count), each QUERIES x DEPTH with the same seed; the last line is
``vs_pytrec_eval_5k=R vs_pytrec_eval_393k=R``, pytrec_eval's median total over lookalike's.

--from-files times the job real users have: a TREC qrels file and a TREC run file on disk, read
and evaluated (P_10, recall_100, recip_rank, map, ndcg_cut_10 for every query). lookalike reads
them with Ranking's Qrels.read / Run.read (Arrow's CSV reader straight into factorised arrays);
pytrec_eval gets the usual Python parsing into its dicts; ranx its Qrels.from_file /
Run.from_file; ir_measures read_trec_qrels / read_trec_run + calc_aggregate. Each library's whole
job is timed REPEAT times (rounds in rotating order, as below) and the median kept; the last line is
each peer's ratio to lookalike. The files are flushed to disk (os.sync) and read through once
before any timer starts, so no library's first round pays for the write-back of 450 MB of fresh
files: every library reads them from the page cache, as a file just written by a retriever is.

Every library starts from the same in-memory input (qrels[qid][uid] -> int, run[qid][uid] -> float,
the form all four accept) and computes P_10, recall_100, recip_rank, map and ndcg_cut_10 for every
query, after one warm-up call each on 50 queries (imports, JIT). Times are wall seconds in this process: 'prepare' is the library's own conversion of the
input (lookalike: Qrels/Run, which includes the canonical ranking; pytrec_eval: RelevanceEvaluator
on the qrels; ranx: Qrels/Run), 'evaluate' the computation, 'total' both. ranx is timed after a
JIT warm-up on a small input (numba compiles on first use). Peak memory is the growth of the
process' resident set during the library's turn (Linux VmHWM, reset before each turn). Scores are
distinct within a query, so tie-breaking conventions cannot make the libraries disagree; the
script asserts that every library's means agree with lookalike's to 1e-9, then prints the ratio
of each peer's total (and evaluate) time to lookalike's. Each library runs REPEAT times, in rounds
whose order rotates (the first large allocations of a process cost more on these VMs, and a fixed
order charged them to lookalike, always first); the medians are printed, and the last line is
``vs_<peer>=…``, each peer's median total over lookalike's.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from lookalike.eval import metrics as M

MEASURES = ["P_10", "recall_100", "recip_rank", "map", "ndcg_cut_10"]


def synthetic(n_queries: int, depth: int, seed: int = 0, vocabulary: int = 0):
    """A run of depth units per query (distinct scores) and 10 graded judgements per query, the units
    drawn from `vocabulary` ids (default 50 x depth)."""
    rng = np.random.default_rng(seed)
    corpus = vocabulary or 50 * depth
    qrels, run = {}, {}
    for q in range(n_queries):
        qid = f"q{q:06d}"
        docs = rng.choice(corpus, size=depth + 5, replace=False)
        scores = rng.permutation(depth) / depth + rng.random() * 1e-3
        run[qid] = {f"d{d}": float(s) for d, s in zip(docs[:depth], scores)}
        judged = np.r_[rng.choice(docs[:depth], size=5, replace=False), docs[depth:]]
        grades = rng.integers(0, 4, size=10)
        grades[0] = max(grades[0], 1)                 # every query has a relevant unit
        qrels[qid] = {f"d{d}": int(g) for d, g in zip(judged, grades)}
    return qrels, run


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def measure(fn):
    gc.collect()
    _reset_peak()
    base = _rss_kb("VmRSS")
    t0 = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - t0
    peak = max(0, _rss_kb("VmHWM") - base)
    return result, elapsed, peak / 1024.0


def rotating_rounds(names: list[str], repeat: int):
    """The libraries to run, in repeat rounds of each once, the first library rotating from round to
    round: the first large allocations of a process cost more on these VMs (memory the host has not
    yet backed), and a fixed order would charge them to whichever library always ran first."""
    for r in range(repeat):
        k = r % len(names)
        yield from names[k:] + names[:k]


def run_lookalike(qrels, run):
    (Q, R), t_prep, m_prep = measure(lambda: (M.Qrels(qrels), M.Run(run)))
    ev, t_eval, m_eval = measure(lambda: M.evaluate(Q, R, MEASURES))
    return ev.mean().to_dict(), t_prep, t_eval, max(m_prep, m_eval)


def run_pytrec(qrels, run):
    import pytrec_eval

    names = {"P.10", "recall.100", "recip_rank", "map", "ndcg_cut.10"}
    ev, t_prep, m_prep = measure(lambda: pytrec_eval.RelevanceEvaluator(qrels, names))
    res, t_eval, m_eval = measure(lambda: ev.evaluate(run))
    means = {m: float(np.mean([v[m] for v in res.values()])) for m in MEASURES}
    return means, t_prep, t_eval, max(m_prep, m_eval)


def run_ranx(qrels, run):
    import ranx

    metrics = ["precision@10", "recall@100", "mrr", "map", "ndcg@10"]
    small_q = {k: qrels[k] for k in list(qrels)[:50]}
    small_r = {k: run[k] for k in list(run)[:50]}
    ranx.evaluate(ranx.Qrels(small_q), ranx.Run(small_r), metrics)          # JIT warm-up
    (Q, R), t_prep, m_prep = measure(lambda: (ranx.Qrels(qrels), ranx.Run(run)))
    res, t_eval, m_eval = measure(lambda: ranx.evaluate(Q, R, metrics, make_comparable=True))
    means = dict(zip(MEASURES, (float(res[m]) for m in metrics)))
    return means, t_prep, t_eval, max(m_prep, m_eval)


def run_ir_measures(qrels, run):
    import ir_measures
    from ir_measures import AP, RR, P, R, nDCG

    ms = [P @ 10, R @ 100, RR, AP, nDCG @ 10]
    res, t_total, mem = measure(lambda: ir_measures.calc_aggregate(ms, qrels, run))
    means = dict(zip(MEASURES, (float(res[m]) for m in ms)))
    return means, 0.0, t_total, mem


PEERS = {"pytrec_eval": run_pytrec, "ranx": run_ranx, "ir_measures": run_ir_measures}


# ----------------------------------------------------------------------------- from files

def write_files(qrels, run, folder: Path) -> tuple[Path, Path]:
    """The synthetic input as TREC files (queries in sorted order, ranks by score, as a run file
    written by any retriever is laid out)."""
    qpath, rpath = folder / "bench.qrels", folder / "bench.run"
    with qpath.open("w") as fh:
        for q in sorted(qrels):
            fh.write("".join(f"{q} 0 {u} {r}\n" for u, r in qrels[q].items()))
    with rpath.open("w") as fh:
        for q in sorted(run):
            ranked = sorted(run[q].items(), key=lambda kv: -kv[1])
            fh.write("".join(f"{q} Q0 {u} {i} {s!r} bench\n" for i, (u, s) in enumerate(ranked, start=1)))
    return qpath, rpath


def files_lookalike(qpath, rpath):
    from lookalike.eval import ranking

    return M.evaluate(ranking.Qrels.read(qpath), ranking.Run.read(rpath), MEASURES).mean().to_dict()


def files_pytrec(qpath, rpath):
    import pytrec_eval

    qrels, run = {}, {}
    with open(qpath) as fh:
        for line in fh:
            q, _, u, r = line.split()
            qrels.setdefault(q, {})[u] = int(r)
    with open(rpath) as fh:
        for line in fh:
            q, _, u, _, s, _ = line.split()
            run.setdefault(q, {})[u] = float(s)
    res = pytrec_eval.RelevanceEvaluator(qrels, {"P.10", "recall.100", "recip_rank", "map", "ndcg_cut.10"}).evaluate(run)
    return {m: float(np.mean([v[m] for v in res.values()])) for m in MEASURES}


def files_ranx(qpath, rpath):
    import ranx

    metrics = ["precision@10", "recall@100", "mrr", "map", "ndcg@10"]
    res = ranx.evaluate(ranx.Qrels.from_file(str(qpath), kind="trec"), ranx.Run.from_file(str(rpath), kind="trec"),
                        metrics, make_comparable=True)
    return dict(zip(MEASURES, (float(res[m]) for m in metrics)))


def files_ir_measures(qpath, rpath):
    import ir_measures
    from ir_measures import AP, RR, P, R, nDCG

    ms = [P @ 10, R @ 100, RR, AP, nDCG @ 10]
    res = ir_measures.calc_aggregate(ms, ir_measures.read_trec_qrels(str(qpath)), ir_measures.read_trec_run(str(rpath)))
    return dict(zip(MEASURES, (float(res[m]) for m in ms)))


FILE_PEERS = {"pytrec_eval": files_pytrec, "ranx": files_ranx, "ir_measures": files_ir_measures}


def from_files(args) -> int:
    import tempfile

    qrels, run = synthetic(args.queries, args.depth, vocabulary=args.vocabulary)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        qpath, rpath = write_files(qrels, run, Path(tmp))
        del qrels, run
        gc.collect()
        os.sync()                                   # written back before any timer (see the docstring)
        for path in (qpath, rpath):
            with path.open("rb") as fh:
                while fh.read(1 << 24):
                    pass
        print(f"input files: {args.queries:,} queries x {args.depth} units; run {rpath.stat().st_size / 2**20:.0f} MiB, "
              f"qrels {qpath.stat().st_size / 2**20:.0f} MiB; written, flushed and read once in "
              f"{time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPUs")
        if "ranx" in args.peers:
            import ranx

            warm = Path(tmp) / "warm"
            warm.mkdir()
            wq, wr = write_files(*synthetic(50, 20, seed=1), warm)
            ranx.evaluate(ranx.Qrels.from_file(str(wq), kind="trec"), ranx.Run.from_file(str(wr), kind="trec"),
                          ["precision@10", "recall@100", "mrr", "map", "ndcg@10"], make_comparable=True)  # JIT warm-up
        jobs = {"lookalike": files_lookalike, **{p: FILE_PEERS[p] for p in args.peers.split(",") if p}}
        names = list(jobs)
        runs: dict[str, list[float]] = {name: [] for name in names}
        times, means = {}, {}
        for name in rotating_rounds(names, args.repeat):
            gc.collect()
            means[name], elapsed, _ = measure(lambda: jobs[name](qpath, rpath))
            runs[name].append(elapsed)
        for name in names:
            times[name] = statistics.median(runs[name])
            print(f"{name:<12} whole job (read both files + evaluate), median of {args.repeat}: {times[name]:.2f} s "
                  f"(rounds: {', '.join(f'{t:.2f}' for t in runs[name])})")
    ref = means["lookalike"]
    for name, got in means.items():
        for m in MEASURES:
            assert abs(got[m] - ref[m]) < 1e-9, f"{name} {m}: {got[m]!r} vs lookalike {ref[m]!r}"
    print("all libraries agree on every mean to 1e-9: " + ", ".join(f"{m}={ref[m]:.4f}" for m in MEASURES))
    print(" ".join(f"vs_{name}={times[name] / times['lookalike']:.2f}" for name in jobs if name != "lookalike"))
    return 0


def agreeing_rounds(jobs: dict, qrels, run, repeat: int) -> dict[str, list[tuple]]:
    """Each library's (means, prepare s, evaluate s, peak MiB) for repeat rotating rounds, after
    checking that every round's means agree with lookalike's first to 1e-9."""
    rounds: dict[str, list[tuple]] = {name: [] for name in jobs}
    for name in rotating_rounds(list(jobs), repeat):
        gc.collect()
        rounds[name].append(jobs[name](qrels, run))
    ref = rounds["lookalike"][0][0]
    for name, got in rounds.items():
        for means, *_rest in got:
            for m in MEASURES:
                assert abs(means[m] - ref[m]) < 1e-9, f"{name} {m}: {means[m]!r} vs lookalike {ref[m]!r}"
    return rounds


def dicts(args) -> int:
    """lookalike and pytrec_eval from dicts at 5,000 and 393,000 distinct unit ids (see the docstring)."""
    ratios = {}
    for label, vocabulary in (("5k", 5_000), ("393k", 393_000)):
        qrels, run = synthetic(args.queries, args.depth, vocabulary=vocabulary)
        distinct = len({u for d in run.values() for u in d})
        small_q, small_r = ({k: d[k] for k in list(d)[:50]} for d in (qrels, run))
        for fn in (run_lookalike, run_pytrec):
            fn(small_q, small_r)
        rounds = agreeing_rounds({"lookalike": run_lookalike, "pytrec_eval": run_pytrec}, qrels, run, args.repeat)
        total = {name: statistics.median(g[1] + g[2] for g in got) for name, got in rounds.items()}
        print(f"{args.queries:,} queries x {args.depth}, {distinct:,} distinct unit ids (drawn from {vocabulary:,}), "
              f"means agree to 1e-9; medians of {args.repeat} rounds: "
              + ", ".join(f"{name} {statistics.median(g[1] for g in got):.3f} + {statistics.median(g[2] for g in got):.3f}"
                          f" = {total[name]:.3f} s (peak {max(g[3] for g in got):.0f} MiB)" for name, got in rounds.items()))
        ratios[label] = total["pytrec_eval"] / total["lookalike"]
        del qrels, run
    print(" ".join(f"vs_pytrec_eval_{label}={r:.2f}" for label, r in ratios.items()))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--peers", default="pytrec_eval,ranx,ir_measures")
    ap.add_argument("--from-files", action="store_true", help="time the whole job from TREC files on disk")
    ap.add_argument("--dicts", action="store_true",
                    help="lookalike against pytrec_eval from dicts at 5,000 and 393,000 distinct unit ids")
    ap.add_argument("--repeat", type=int, default=3, help="runs per library (the median is kept)")
    ap.add_argument("--vocabulary", type=int, default=0,
                    help="distinct unit ids the run draws from (default 50 x depth; 393000 is the size of the "
                         "largest visual-document collection)")
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_NUM_THREADS", str(os.cpu_count() or 1))
    if args.from_files:
        return from_files(args)
    if args.dicts:
        if "--queries" not in " ".join(argv if argv is not None else sys.argv):
            args.queries = 5_000
        if "--repeat" not in " ".join(argv if argv is not None else sys.argv):
            args.repeat = 5
        return dicts(args)
    t0 = time.perf_counter()
    qrels, run = synthetic(args.queries, args.depth, vocabulary=args.vocabulary)
    distinct = len({u for d in run.values() for u in d})
    print(f"input: {args.queries:,} queries x {args.depth} units ({args.queries * args.depth:,} run entries, "
          f"{distinct:,} distinct unit ids, {sum(map(len, qrels.values())):,} judgements); built in {time.perf_counter() - t0:.1f} s; "
          f"{os.cpu_count()} CPUs")
    peers = [p for p in args.peers.split(",") if p]
    # every library once on 50 queries outside the timers: imports and first-call set-up (lookalike's
    # pyarrow.compute, ranx's numba JIT) are one-time costs, not the evaluation of this input
    small_q, small_r = ({k: d[k] for k in list(d)[:50]} for d in (qrels, run))
    for fn in [run_lookalike] + [PEERS[name] for name in peers]:
        fn(small_q, small_r)
    jobs = {"lookalike": run_lookalike, **{name: PEERS[name] for name in peers}}
    names = list(jobs)
    rounds = agreeing_rounds(jobs, qrels, run, args.repeat)
    ref = rounds["lookalike"][0][0]
    print("all libraries agree on every mean to 1e-9: " + ", ".join(f"{m}={ref[m]:.4f}" for m in MEASURES))
    med = {name: (statistics.median(g[1] for g in got), statistics.median(g[2] for g in got),
                  statistics.median(g[1] + g[2] for g in got), max(g[3] for g in got)) for name, got in rounds.items()}
    lp, le, lt, _ = med["lookalike"]
    print(f"medians of {args.repeat} rounds (the order of the libraries rotates from round to round)")
    print(f"{'library':<12} {'prepare s':>10} {'evaluate s':>11} {'total s':>9} {'peak MiB':>9} "
          f"{'total / lookalike':>18} {'evaluate / lookalike':>21}  total s of each round")
    for name, (tp, te, tt, mem) in med.items():
        print(f"{name:<12} {tp:>10.2f} {te:>11.2f} {tt:>9.2f} {mem:>9.0f} {tt / lt:>18.2f} {te / le:>21.2f}  "
              + ", ".join(f"{g[1] + g[2]:.2f}" for g in rounds[name]))
    print(" ".join(f"vs_{name}={med[name][2] / lt:.2f}" for name in names if name != "lookalike"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
