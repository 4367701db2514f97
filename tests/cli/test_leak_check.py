"""lookalike leak-check (cli.leak_check): its exit statuses and the shuffled corpus for a run file."""

from __future__ import annotations

from pathlib import Path
import pandas as pd
import pytest
from tests.conftest import run_from_rankings
import subprocess
import sys


def test_leak_check_exits_3_when_no_pairs_can_be_built(monkeypatch, capsys):
    """A corpus without captions (and no blind query file) yields no pairs: the gate did not run —
    exit 3 and 'NOT EVALUATED', never 0 (a pass) or 1 (a leak)."""
    from lookalike.cli import leak_check
    from lookalike.stages import leak_ablation, stratify_corpus

    nan = float("nan")
    empty = pd.DataFrame({"index": ["image", "image"], "query_set": ["blind", "caption-derived"], "n": [0, 0],
                          "recall_10": [nan, nan], "recall_10_lo": [nan, nan], "recall_10_hi": [nan, nan]})
    from lookalike.data.schema import Corpus

    monkeypatch.setattr(stratify_corpus, "load_corpus", lambda ctx: Corpus(units=pd.DataFrame({"unit_id": [], "doc_id": []})))
    no_pairs = pd.DataFrame(columns=["index", "query_id", "unit_id", "query_set", "recall_10"])
    fake = type("A", (), {"pixel_pq": no_pairs, "probe": {}, "not_evaluated": ""})()
    monkeypatch.setattr(leak_ablation, "ablation", lambda *a, **k: (fake, None, None, empty, no_pairs))
    assert leak_check.main([str(REPO / "params" / "ci.yaml")]) == 3
    out = capsys.readouterr().out
    assert "NOT EVALUATED" in out
    # no row of NaN before the verdict: the rows over no query are named as not measured
    assert "nan" not in out.lower() and "not measured (no query pairs): image index, blind queries" in out


def test_shuffled_corpus_then_the_gate_says_leak_for_a_run_that_reads_captions(tmp_path):
    """leak-check --shuffled-corpus writes the photo corpus with captions moved among units; a scripted
    retriever that ranks by caption words gives another run on it, and stage 03's probe says LEAK; one
    that reads only the image file gives the same run, and it says PASS. A folder with files is refused."""
    from tests.shapes.shape_corpora import SHAPES

    from lookalike import params as P
    from lookalike import stages
    from lookalike.cli import leak_check
    from lookalike.judging.judges import content_words
    from lookalike.stages import leak_ablation

    params = SHAPES["photos-captions"](tmp_path / "corpus", seed=11)
    out = tmp_path / "shuffled"
    assert leak_check.main([str(params), "--shuffled-corpus", str(out)]) == 0
    shuffled = pd.read_csv(out / "manifest.csv", keep_default_na=False)
    assert (out / "README.md").is_file() and all(Path(p).is_file() for p in shuffled["image_path"])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep me")
    assert leak_check.main([str(params), "--shuffled-corpus", str(tmp_path / "full")]) == 2
    assert (tmp_path / "full" / "mine.txt").read_text() == "keep me"

    prm = P.load_params(params)
    ctx = stages.context(tmp_path / "run", prm)
    from lookalike.stages import stratify_corpus
    units = stratify_corpus.load_corpus(ctx).units
    original = units[["unit_id", "caption"]]
    questions = {f"q{i}": w for i, w in enumerate(sorted({w for c in units["caption"] for w in content_words(c)})[:12])}

    def by_caption(frame):
        caption = dict(zip(frame["unit_id"], frame["caption"]))
        return run_from_rankings({q: sorted(frame["unit_id"], key=lambda u, w=w: (w not in content_words(caption[u]), u))[:10]
                     for q, w in questions.items()})

    def by_pixels(frame):
        import hashlib
        return run_from_rankings({q: sorted(frame["unit_id"], key=lambda u, w=w: hashlib.sha256(
            (w + Path(frame.set_index("unit_id").loc[u, "image_path"]).read_bytes().hex()[:64]).encode()).hexdigest())[:10]
            for q, w in questions.items()})

    from lookalike.data.schema import resolve_image
    original_paths = units.assign(image_path=[str(resolve_image(str(p), ctx.run_dir).resolve()) for p in units["image_path"]])
    (ctx.run_dir / "runs").mkdir(parents=True, exist_ok=True)
    from lookalike.eval import ranking
    for name, ranker, frame_a, frame_b in (("captions", by_caption, original, shuffled),
                                           ("pixels", by_pixels, original_paths, shuffled)):
        ranking.write_run(ranker(frame_a), ctx.run_dir / "runs" / f"{name}.run", tag=name)
        ranking.write_run(ranker(frame_b), tmp_path / f"{name}.shuffled.run", tag=name)
    prm["retrieve"]["external_runs"] = [f"captions={tmp_path / 'x.run'}", f"pixels={tmp_path / 'y.run'}"]
    prm["leak"]["shuffled_runs"] = [f"captions={tmp_path / 'captions.shuffled.run'}",
                                    f"pixels={tmp_path / 'pixels.shuffled.run'}"]
    cfg = stages.context(tmp_path / "run", prm).config
    results, notes = leak_ablation.shuffled_run_probes(cfg, units, ctx.run_dir)
    verdicts = {g.index: g.verdict for g in results}
    assert verdicts == {"captions": "LEAK", "pixels": "PASS"}, [g.sentence() for g in results]
    prm["leak"]["shuffled_runs"] = ["nobody=x.run"]
    with pytest.raises(ValueError, match="'nobody' is not one of your runs"):
        leak_ablation.shuffled_run_probes(stages.context(tmp_path / "run", prm).config, units, ctx.run_dir)


REPO = Path(__file__).resolve().parents[2]


def _leak_check(*extra):
    return subprocess.run([sys.executable, "-m", "lookalike", "leak-check", str(REPO / "params" / "ci.yaml"), *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=900)


def test_gate_passes_on_the_ci_configuration():
    res = _leak_check()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS" in res.stdout and "image: caption-derived − blind recall@10" in res.stdout and "decision rule, per pixel system: LEAK when" in res.stdout and "ocr-bm25: caption-derived" in res.stdout
    # the image index's PASS states the power measured in the same run, on a planted caption-index leak
    assert "a caption-index leak planted in this run (the image index reading the caption fields) moved" in res.stdout
    # one difference, one interval, wherever it is printed: the ci corpus is smaller than leak.gate_units, so
    # leak-check gates the same units as stage 03 did in the stored ci run, with the same seed and resamples
    import json
    stored = json.loads((REPO / "outputs" / "ci" / "notebooks" / "03_leak_ablation.ipynb").read_text(encoding="utf-8"))
    printed = "".join("".join(o.get("text", "")) for c in stored["cells"] for o in c.get("outputs", []))
    line = next(x for x in printed.splitlines() if x.startswith("image: caption-derived"))
    assert line.split(": PASS")[0] in res.stdout, (line, res.stdout)


def test_gate_fails_when_a_caption_leak_is_injected():
    res = _leak_check("--inject-caption-leak")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL" in res.stdout and "caption-index leak injected" in res.stdout


def test_gate_fails_when_the_file_name_is_appended():
    """A partial leak too small to move recall (the old gate passed it 19 times in 20): the probe sees it."""
    res = _leak_check("--inject-leak", "filename")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "changes when the caption fields are shuffled" in res.stdout


def test_a_shuffled_corpus_folder_that_cannot_be_written_is_refused_before_the_corpus_is_read(tmp_path, monkeypatch,
                                                                                            capsys):
    """--shuffled-corpus onto a folder it cannot write ended in a traceback after reading the whole corpus."""
    from lookalike.cli import leak_check
    from lookalike.stages import stratify_corpus

    read = []
    monkeypatch.setattr(stratify_corpus, "load_corpus", lambda ctx: read.append(1))
    (tmp_path / "a-file").write_text("mine")
    out = tmp_path / "a-file" / "shuffled"          # a folder inside a file: no one can write it
    assert leak_check.main([str(REPO / "params" / "ci.yaml"), "--shuffled-corpus", str(out)]) == 2
    said = capsys.readouterr().out
    assert f"cannot write {out}" in said and "nothing was written" in said and not read
    assert (tmp_path / "a-file").read_text() == "mine"
