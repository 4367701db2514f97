"""The whole pipeline at growing corpus sizes: every stage timed, its peak memory recorded, and how its
time grows fitted from the sizes.

    python benchmarks/scale_pipeline.py --sizes 1000,10000            # minutes
    python benchmarks/scale_pipeline.py --sizes 1000,10000,100000     # the 100k size takes hours on 2 cores

Each size is a generated manifest corpus (``make_corpus``): N units, each a small page image with
its text kept beside it the way stage 01 keeps a PDF page's text layer (so no page is OCR'd: OCR
would be the whole cost, and its rate is measured in benchmarks/text_layer.py), in filings-like
templates — one template per metric, 20 pages per entity (4 periods x 5 metrics), so every page has
look-alikes that share its template — and N / 20 questions with an answer and a qrels line each
(questions grow with the corpus). Each size has its own cache folder, empty at the start (the
sizes share pages, which a shared cache would hand the larger size ready-made). The encoders are the cheap built-ins the shape lane uses (BM25
and MiniLM over the page text, the appearance vector over the pixels).

Every stage runs in a child process of its own (``lookalike.stages.<module>.run`` then save, the
library path the notebooks call), so its peak resident memory (ru_maxrss) is that stage's own,
imports included (about 0.5 GiB of it is torch and the libraries every stage imports); its time is
the stage call alone, imports excluded. The growth exponent of a stage is the least-squares slope
of log(time) against log(N) over the sizes; n log n's own slope over the same sizes is printed
beside it, and a stage whose exponent exceeds it by more than 0.15 is marked. Small sizes are
dominated by fixed costs, so an exponent from 1k and 10k alone understates growth: read it with
the 100k size where it ran.

Last line: ``max_exponent=E stage=S peak_rss_gib=M`` (the largest exponent, its stage, and the
largest peak over every stage and size).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))

ENTITIES_PER_BLOCK = 20          # pages per entity: 4 periods x 5 metrics
PERIODS = ["2021", "2022", "2023", "2024"]
METRICS = ["revenue", "net income", "operating margin", "headcount", "capital expenditure"]
FILLER = ("segment", "quarter", "outlook", "guidance", "region", "growth", "cost", "customers", "supply",
          "demand", "pricing", "inventory", "contracts", "backlog", "currency", "tax", "dividend", "debt",
          "cash", "assets", "liabilities", "equity", "shares", "auditor", "risk", "litigation", "lease")


def make_corpus(folder: Path, n: int, seed: int = 0) -> Path:
    """N units as a manifest corpus with page text, N // 20 questions; returns the params file."""
    from PIL import Image

    from lookalike.io.text_layer import text_layer_path

    rng = np.random.default_rng(seed)
    imgs = folder / "pages"
    imgs.mkdir(parents=True)
    rows, facts = ["unit_id,image_path,template_id,entity,metric,period,content_type"], []
    palette = rng.integers(0, 256, size=(len(METRICS), 3))
    for i in range(n):
        ent, k = divmod(i, ENTITIES_PER_BLOCK)
        period, metric = PERIODS[k // len(METRICS)], METRICS[k % len(METRICS)]
        entity = f"Company{ent:05d}"
        value = f"${rng.integers(1, 999)}.{rng.integers(0, 9)} million"
        uid = f"{entity.lower()}-{period}:{1 + k % len(METRICS)}"
        name = f"u{i:06d}.png"
        # a page of its template's colour with its own faint noise: alike within a template, never byte-identical
        pixels = (palette[k % len(METRICS)] + rng.integers(0, 24, size=(64, 48, 3))) % 256
        Image.fromarray(pixels.astype(np.uint8), "RGB").save(imgs / name, optimize=False, compress_level=1)
        filler = " ".join(rng.choice(FILLER, size=40))
        text_layer_path(imgs / name).write_text(f"{entity} annual report {period}. {metric.title()}: {value}. {filler}",
                                                encoding="utf-8")
        rows.append(f"{uid},{name},{metric.replace(' ', '-')},{entity},{metric},{period},table")
        facts.append((uid, entity, period, metric, value))
    (imgs / "manifest.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    chosen = rng.choice(n, size=max(1, n // ENTITIES_PER_BLOCK), replace=False)
    with (folder / "questions.jsonl").open("w", encoding="utf-8") as qf, (folder / "qrels.txt").open("w") as rf:
        for j, i in enumerate(sorted(int(x) for x in chosen)):
            uid, entity, period, metric, value = facts[i]
            qf.write(json.dumps({"query_id": f"q{j:06d}", "text": f"What was the {metric} of {entity} in {period}?",
                                 "answer": value}) + "\n")
            rf.write(f"q{j:06d} 0 {uid} 1\n")
    params = folder / "scale.yaml"
    params.write_text(f"""run: scale-{n}
title: scale benchmark, {n} units
corpus:
  source: manifest
  manifest: {imgs / 'manifest.csv'}
  questions: {folder / 'questions.jsonl'}
  qrels: {folder / 'qrels.txt'}
encode:
  encoders: [ocr-bm25, ocr-minilm, appearance]
  cache_dir: {folder / 'cache'}
""", encoding="utf-8")
    return params


STAGE_CHILD = r"""
import importlib, json, resource, sys, time
from pathlib import Path
from lookalike import params as P, stages
run_dir, params_file, module = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = stages.context(run_dir, P.load_params(params_file))
mod = importlib.import_module(f"lookalike.stages.{module}")
t0 = time.perf_counter()
res = mod.run(ctx)
res.save()
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run_stages(params: Path, run_dir: Path, log=print) -> list[dict]:
    """Every stage in a child process of its own; returns one row per stage that ran. A stage that fails
    (out of memory, say) is a row with its error, and the stages after it do not run: the sizes before
    it and the stages before it keep their figures."""
    from lookalike import stages

    env = dict(os.environ, TQDM_DISABLE="1", PYTHONPATH=str(REPO / "lib") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    for notebook, module in stages.STAGES.items():
        done = subprocess.run([sys.executable, "-c", STAGE_CHILD, str(run_dir), str(params), module], env=env,
                              capture_output=True, text=True)
        if done.returncode:
            error = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            log(f"  {notebook:<24} failed: {error}\n{done.stderr[-4000:]}")
            rows.append({"stage": notebook, "seconds": float("nan"), "peak_gib": float("nan"), "failed": error})
            break
        got = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append({"stage": notebook, "seconds": got["seconds"], "peak_gib": got["peak_kib"] / 2**20})
        log(f"  {notebook:<24} {got['seconds']:>9.1f} s  peak {got['peak_kib'] / 2**20:.2f} GiB")
    return rows


def exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log(seconds) on log(size)."""
    x, y = np.log(np.asarray(sizes, dtype=float)), np.log(np.maximum(np.asarray(seconds, dtype=float), 1e-3))
    return float(np.polyfit(x, y, 1)[0]) if len(sizes) > 1 else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated unit counts")
    ap.add_argument("--work", default="", help="folder for the corpora and runs (default: a temporary one, removed)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="lookalike-scale-"))
    results: dict[int, list[dict]] = {}
    try:
        for n in sizes:
            folder = work / f"n{n}"
            if folder.exists():
                shutil.rmtree(folder)
            t0 = time.perf_counter()
            params = make_corpus(folder, n, args.seed)
            print(f"{n:,} units, {max(1, n // ENTITIES_PER_BLOCK):,} questions: corpus written in "
                  f"{time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPUs", flush=True)
            results[n] = run_stages(params, folder / "run")
            print(f"  {'all stages':<24} {sum(r['seconds'] for r in results[n]):>9.1f} s", flush=True)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    stage_names = list(dict.fromkeys(r["stage"] for n in sizes for r in results.get(n, [])))
    cell = {(n, r["stage"]): r for n in sizes for r in results.get(n, [])}
    ref = exponent(sizes, [n * math.log(n) for n in sizes])
    print(f"\nseconds per stage (peak GiB); exponent: slope of log time on log units; n log n's own slope "
          f"over these sizes: {ref:.2f}")
    print(f"{'stage':<24}" + "".join(f"{n:>18,}" for n in sizes) + f"{'exponent':>10}")
    exps = {}
    def shown(r: dict | None) -> str:
        if r is None:
            return f"{'not run':>18}"
        return f"{'failed':>18}" if r.get("failed") else f"{r['seconds']:>10.1f} ({r['peak_gib']:.2f})"

    for stage in stage_names:
        ran = [n for n in sizes if (n, stage) in cell and not cell[(n, stage)].get("failed")]
        # the exponent over the sizes the stage finished at (a failed or unrun size is left out, and said)
        exps[stage] = exponent(ran, [cell[(n, stage)]["seconds"] for n in ran])
        mark = "  above n log n" if exps[stage] > ref + 0.15 else ""
        print(f"{stage:<24}" + "".join(shown(cell.get((n, stage))) for n in sizes) + f"{exps[stage]:>10.2f}{mark}")
    complete = [n for n in sizes if all((n, s) in cell and not cell[(n, s)].get("failed") for s in stage_names)]
    totals = [sum(cell[(n, s)]["seconds"] for s in stage_names) for n in complete]
    print(f"{'all stages':<24}" + "".join(f"{t:>18.1f}" for t in totals) + f"{exponent(complete, totals):>10.2f}"
          + ("" if complete == sizes else f"  (sizes where every stage finished: {', '.join(map(str, complete))})"))
    failed = [f"{s}@{n}" for (n, s), r in sorted(cell.items()) if r.get("failed")]
    for (n, s), r in sorted(cell.items()):
        if r.get("failed"):
            print(f"{s} failed at {n:,} units: {r['failed']}")
    fitted = {s: e for s, e in exps.items() if e == e}
    worst = max(fitted, key=lambda s: fitted[s]) if fitted else "none"
    peaks = [r["peak_gib"] for r in cell.values() if not r.get("failed")]
    print(f"max_exponent={fitted.get(worst, float('nan')):.2f} stage={worst} peak_rss_gib={max(peaks) if peaks else float('nan'):.2f}"
          + (f" failed={','.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
