"""The benchmark scripts run (at toy scale) and their agreement checks hold; timings are not asserted."""

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_metrics_benchmark_agrees_with_peers_at_toy_scale(capsys):
    bench = _load("metrics")
    assert bench.main(["--queries", "300", "--depth", "30", "--peers", "pytrec_eval,ir_measures", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "all libraries agree on every mean to 1e-9" in out
    assert "medians of 2 rounds" in out
    assert out.strip().splitlines()[-1].startswith("vs_pytrec_eval=") and " vs_ir_measures=" in out.strip().splitlines()[-1]


def test_metrics_benchmark_from_files_agrees_and_ends_with_the_ratios(capsys):
    bench = _load("metrics")
    assert bench.main(["--from-files", "--queries", "300", "--depth", "30", "--repeat", "1",
                       "--peers", "pytrec_eval,ir_measures"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert any("all libraries agree on every mean to 1e-9" in line for line in out)
    assert out[-1].startswith("vs_pytrec_eval=") and " vs_ir_measures=" in out[-1]


def test_metrics_benchmark_from_dicts_at_two_vocabularies_ends_with_both_ratios(capsys):
    bench = _load("metrics")
    assert bench.main(["--dicts", "--queries", "200", "--depth", "20", "--repeat", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 3 and all("means agree to 1e-9" in line for line in out[:2])
    assert "5,000 distinct" in out[0] or "(drawn from 5,000)" in out[0]
    assert "(drawn from 393,000)" in out[1]
    first, second = out[-1].split()
    assert first.startswith("vs_pytrec_eval_5k=") and second.startswith("vs_pytrec_eval_393k=")
    assert float(first.split("=")[1]) > 0 and float(second.split("=")[1]) > 0


@pytest.mark.parametrize("corpus", ["structured", "uniform"])
def test_maxsim_benchmark_checks_the_pruned_topk_against_exact_and_ends_with_the_line(capsys, corpus):
    bench = _load("maxsim")
    assert bench.main(["--corpus", corpus, "--queries", "6", "--pages", "80", "--page-tokens", "40", "--dim", "32",
                       "--k", "5", "--clusters", "24", "--repeat", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert any("exact vs colpali-engine scores" in line for line in out)
    assert out[-1].startswith("speedup_vs_colpali_engine=") and "topk_identical=True" in out[-1]


def test_encode_benchmark_runs_at_toy_scale(capsys):
    bench = _load("encode")
    assert bench.main(["--pages", "3", "--engines", "tesseract"]) == 0
    assert "MiniLM" in capsys.readouterr().out



def test_the_ray_cpu_breakdown_counts_each_tesseract_once():
    # a tesseract process is a descendant of its actor: seen running by the sampler and, once it
    # exits, in the actor's children times. Counting both would charge its CPU to Ray's processes.
    bench = _load("encode")
    sampler = bench.CpuSampler()
    sampler.base = {1: ("driver", 10.0, 0.0), 2: ("raylet", 5.0, 0.0)}
    sampler.last = {1: ("driver", 10.5, 0.0), 2: ("raylet", 5.25, 0.0),
                    3: ("ray::MapWorker(Map(_OcrActor))", 1.0, 4.0),      # started during the stage
                    4: ("/usr/bin/tesseract", 0.75, 0.0),                  # the actor's child, seen running
                    5: ("tesseract", 0.5, 0.0)}
    assert sampler.by_role() == {"tesseract": 4.0, "actors' python": 1.0, "driver": 0.5,
                                 "ray's other processes": 0.25}

def test_negatives_benchmark_runs_at_toy_scale(capsys):
    bench = _load("negatives")
    assert bench.main(["--units", "8000", "--dim", "16"]) == 0
    assert "goal <= 60 s" in capsys.readouterr().out


def test_label_queue_benchmark_hands_out_the_same_pairs_both_ways(capsys):
    bench = _load("label_queue")
    assert bench.main(["--pairs", "500", "--people", "3", "--requests", "30"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "the same 30 pairs handed out in the same order" in out[0]
    assert out[-1].startswith("next_vs_rehash=")


def test_text_layer_benchmark_runs_at_toy_scale(capsys):
    bench = _load("text_layer")
    assert bench.main(["--docs", "1", "--pages", "2", "--dpi", "40", "--repeat", "1", "--no-ocr"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "text layer: 2 of 2 pages usable" in "\n".join(out)
    assert out[-1].startswith("layer_pages_per_s=")


def test_scale_pipeline_corpus_is_read_whole_and_the_report_fits_each_stage(tmp_path, capsys, monkeypatch):
    """The scale benchmark's corpus: every unit read with its page text (no OCR), N / 20 questions with
    a qrels line each; the fitted exponent of a stage whose time grows as n^2 is 2, and the last line
    names the steepest stage and the largest peak."""
    import pandas as pd

    from lookalike import params as P, stages
    from lookalike.stages import stratify_corpus

    bench = _load("scale_pipeline")
    params = bench.make_corpus(tmp_path / "c", 60)
    units = stratify_corpus.run(stages.context(tmp_path / "run", P.load_params(params))).tables["units"]
    assert len(units) == 60 and units["unit_id"].is_unique and set(units["text_source"]) == {"text-layer"}
    assert len(pd.read_csv(tmp_path / "c" / "qrels.txt", sep=" ", header=None)) == 3
    assert len((tmp_path / "c" / "questions.jsonl").read_text().splitlines()) == 3
    assert bench.exponent([10, 100], [1.0, 100.0]) == pytest.approx(2.0)

    def fake(params, run_dir, log=print):
        n = int(Path(params).parent.name[1:])
        return [{"stage": "01_a", "seconds": n / 100, "peak_gib": 0.1}, {"stage": "02_b", "seconds": (n / 100) ** 2,
                                                                          "peak_gib": n / 1000}]

    monkeypatch.setattr(bench, "run_stages", fake)
    assert bench.main(["--sizes", "100,200", "--work", str(tmp_path / "w")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "max_exponent=2.00 stage=02_b peak_rss_gib=0.20"

    def fails_at_300(params, run_dir, log=print):
        rows = fake(params, run_dir)
        if "300" in Path(params).parent.name:
            rows[1] = {"stage": "02_b", "seconds": float("nan"), "peak_gib": float("nan"), "failed": "MemoryError"}
        return rows

    # a stage that fails at one size is said, and the sizes and stages that finished keep their figures
    monkeypatch.setattr(bench, "run_stages", fails_at_300)
    assert bench.main(["--sizes", "100,200,300", "--work", str(tmp_path / "w")]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert "02_b failed at 300 units: MemoryError" in out
    assert out[-1] == "max_exponent=2.00 stage=02_b peak_rss_gib=0.20 failed=02_b@300"


def test_text_encoder_runtimes_benchmark_compares_on_the_same_texts(capsys):
    bench = _load("text_encoder_runtimes")
    assert bench.main(["--texts", "6", "--queries", "3", "--rounds", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    torch_line = next(line for line in out if line.startswith("torch "))
    assert "max |score - torch's| 0.00e+00" in torch_line and "same top 10: 100% of 3 queries" in torch_line
    assert any(line.startswith("int8 ") for line in out)
    assert re.fullmatch(r"onnx_vs_torch=(\d+\.\d\d|nan) int8_vs_torch=\d+\.\d\d onnx_max_score_diff=\S+ "
                        r"int8_max_score_diff=\d\.\de[-+]\d\d", out[-1])
