"""Benchmark: the leak gate's operating characteristics on the CI configuration.

    python benchmarks/leak_gate_power.py [--seeds 20] [--params params/ci.yaml] [--gate-units N]

For each condition — clean, and each fault injection of ``lookalike leak-check --inject-leak``
(caption-index; caption, filename, alt-text appended to what the image path reads) — the gate
runs once per seed; the gate says LEAK when any pixel system (the image index, BM25 over the OCR
text, their fusion) leaks, by either of its two tests: the metadata probe (the system's input
path run again with the caption fields shuffled among units) or the paired retrieval difference.
The per-system line also counts how often each test alone said LEAK. The corpus is the configuration's (its seed fixed); each gate seed draws its own sample of
leak.gate_units units, its own query sets and its own bootstrap. Prints per condition how often
the gate said LEAK (the false-alarm rate for clean, the detection rate for each injection) with a
Wilson 95% interval, the median paired difference, and the median seconds per gate run (warm: the
corpus is read once and the OCR cache filled by a first, cold run, whose time is printed too); the
last line is

    false_alarm=… detection_caption=… detection_filename=… detection_alt-text=…

Goal (issue 14): false alarms <= 0.05, detection >= 0.95 for caption and filename injections.
The metadata probe covers systems whose input path lookalike runs (the built-in encoders); a
retriever that enters as a run file has only the retrieval test, whose power this also prints.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from lookalike import params  # noqa: E402
from lookalike.analysis import leakage  # noqa: E402
from lookalike.cli.leak_check import run_gate  # noqa: E402
from lookalike.eval import stats  # noqa: E402
from lookalike.io.cache import Cache  # noqa: E402
from lookalike.stages import context, stratify_corpus  # noqa: E402

CONDITIONS = ("clean",) + tuple(leakage.INJECTIONS)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--params", default=str(Path(__file__).resolve().parents[1] / "params" / "ci.yaml"))
    ap.add_argument("--gate-units", type=int, default=None, help="override leak.gate_units")
    args = ap.parse_args(argv)
    prm = params.load_params(args.params)
    if args.gate_units:
        prm["leak"]["gate_units"] = args.gate_units
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(prm["encode"]["cache_dir"] or Path(tmp) / "cache")
        run_dir = Path(tmp) / "run"
        corpus = stratify_corpus.load_corpus(context(run_dir, prm))          # read the corpus once
        t0 = time.perf_counter()
        run_gate(prm, "", seed=10_000, cache=cache, run_dir=run_dir, corpus=corpus)   # cold: fills the OCR cache
        cold = time.perf_counter() - t0
        rates, by_system, by_test = {}, {}, {}
        print(f"gate_units={prm['leak']['gate_units']} threshold={prm['leak']['threshold']} seeds={args.seeds} "
              f"units={len(corpus.units)} cold_gate_s={cold:.1f}")
        print(f"{'condition':<10} {'LEAK':>5} {'rate':>6} {'95% CI (Wilson)':>17} {'median diff':>12} {'pairs':>6} {'s/run':>6}")
        for cond in CONDITIONS:
            leaks, diffs, secs, pairs = 0, [], [], []
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                results, _, _ = run_gate(prm, "" if cond == "clean" else cond, seed=seed, cache=cache,
                                         run_dir=run_dir, corpus=corpus)
                secs.append(time.perf_counter() - t0)
                leaks += leakage.overall(results) == "LEAK"
                for r in results:
                    by_system.setdefault((cond, r.index), []).append(r.verdict == "LEAK")
                    by_test.setdefault((cond, "probe"), []).append(r.probe_changed > 0)
                    by_test.setdefault((cond, "retrieval"), []).append(r.lo > 0 and r.difference > r.threshold)
                diffs.append(results[0].difference)
                pairs.append(results[0].n_pairs)
            ci = stats.proportion_ci(leaks, args.seeds)
            rates[cond] = ci.estimate
            print(f"{cond:<10} {leaks:>5} {ci.estimate:>6.2f} {f'[{ci.lo:.2f}, {ci.hi:.2f}]':>17} "
                  f"{statistics.median(diffs):>+12.3f} {statistics.median(pairs):>6.0f} {statistics.median(secs):>6.1f}")
    print("LEAK per pixel system (of the seeds): " + "; ".join(
        f"{cond}/{name} {sum(v)}" for (cond, name), v in sorted(by_system.items())))
    print("LEAK per test (system-seeds): " + "; ".join(
        f"{cond}/{test} {sum(v)} of {len(v)}" for (cond, test), v in sorted(by_test.items())))
    print(" ".join([f"false_alarm={rates['clean']:.2f}"] + [f"detection_{c}={rates[c]:.2f}" for c in leakage.INJECTIONS]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
