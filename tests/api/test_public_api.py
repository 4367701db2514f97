"""The public API (lookalike.compare / Report / open_run / read_*) and lookalike.plugin."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import lookalike
from lookalike.cli import eval as eval_cli
from lookalike.eval import metrics
from lookalike.eval import stats

REPO = Path(__file__).resolve().parents[2]


def _data(n_queries: int = 30, seed: int = 0):
    """Qrels with two relevant units per query among 20, and three runs of different skill."""
    rng = np.random.default_rng(seed)
    qrels, runs = [], {"weak": [], "mid": [], "strong": []}
    for q in range(n_queries):
        qid = f"q{q:03d}"
        rel = set(rng.choice(20, 2, replace=False).tolist())
        qrels += [(qid, f"u{u:02d}", int(u in rel)) for u in range(20)]
        for name, skill in (("weak", 0.0), ("mid", 0.8), ("strong", 2.0)):
            scores = rng.normal(size=20) + skill * np.isin(np.arange(20), list(rel))
            runs[name] += [(qid, f"u{u:02d}", float(s)) for u, s in enumerate(scores)]
    q = pd.DataFrame(qrels, columns=["query_id", "unit_id", "relevance"])
    return q, {k: pd.DataFrame(v, columns=["query_id", "unit_id", "score"]) for k, v in runs.items()}


def test_compare_agrees_with_evaluate_and_with_holm_per_measure():
    qrels, runs = _data()
    rep = lookalike.compare(qrels, runs, ["ndcg@10", "P@5"], baseline="weak", n_boot=500, n_perm=2000)
    t = rep.to_dataframe()
    assert rep.systems == ["weak", "mid", "strong"] and list(t["measure"].unique()) == ["ndcg@10", "P@5"]
    for name, run in runs.items():
        means = metrics.evaluate(qrels, run, ["ndcg_cut_10", "P_5"]).mean()
        got = t[t["system"] == name].set_index("measure")["mean"]
        assert got["ndcg@10"] == pytest.approx(means["ndcg_cut_10"]) and got["P@5"] == pytest.approx(means["P_5"])
    for _m, part in t.groupby("measure"):
        others = part[part["system"] != "weak"]
        assert np.allclose(others["p_holm"], stats.holm(others["p_randomisation"].to_numpy()))
        assert (others["wins"] + others["ties"] + others["losses"] == 30).all()
        base = part[part["system"] == "weak"].iloc[0]
        assert np.isnan(base["delta"]) and pd.isna(base["wins"])
    strong = t[(t["system"] == "strong") & (t["measure"] == "ndcg@10")].iloc[0]
    assert strong["delta"] > 0 and strong["p_holm"] < 0.05 and strong["delta_lo"] > 0


def test_adding_a_run_moves_no_other_runs_interval():
    qrels, runs = _data()
    two = lookalike.compare(qrels, {k: runs[k] for k in ("weak", "mid")}, ["map"], n_boot=300, n_perm=500).table
    three = lookalike.compare(qrels, runs, ["map"], n_boot=300, n_perm=500).table
    for name in ("weak", "mid"):
        a, b = two[two["system"] == name].iloc[0], three[three["system"] == name].iloc[0]
        assert (a["ci_lo"], a["ci_hi"]) == (b["ci_lo"], b["ci_hi"])


def test_compare_refuses_what_it_cannot_compare():
    qrels, runs = _data(5)
    with pytest.raises(lookalike.MeasureError, match="num_q is a count"):
        lookalike.compare(qrels, runs, ["num_q"])
    with pytest.raises(ValueError, match="at least two runs"):
        lookalike.compare(qrels, {"weak": runs["weak"]})
    with pytest.raises(ValueError, match="baseline 'bm25' is not one of the runs"):
        lookalike.compare(qrels, runs, baseline="bm25")
    with pytest.raises(lookalike.MeasureError, match="did you mean"):
        lookalike.compare(qrels, runs, ["ndgc@10"])


def test_queries_one_run_lacks_are_left_out_and_said():
    qrels, runs = _data(10)
    short = runs["mid"][runs["mid"]["query_id"] != "q000"]
    rep = lookalike.compare(qrels, {"weak": runs["weak"], "mid": short}, ["map"], n_boot=200, n_perm=200)
    assert rep.n_queries == 9 and (rep.table["n"] == 9).all()
    assert any("weak: 1 of its 10 scored queries are left out" in n for n in rep.notes)
    full = lookalike.compare(qrels, {"weak": runs["weak"], "mid": short}, ["map"], complete=True, n_boot=200,
                             n_perm=200)
    assert full.n_queries == 10 and not full.notes


def test_report_saves_and_escapes(tmp_path):
    qrels, runs = _data(8)
    runs = {"<b>bold</b>": runs["weak"], "a_b&c": runs["mid"]}
    rep = lookalike.compare(qrels, runs, ["map"], n_boot=200, n_perm=200)
    page = rep.save(tmp_path / "r.html").read_text()
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    tex = rep.save(tmp_path / "r.tex").read_text()
    assert r"a\_b\&c" in tex and r"\toprule" in tex
    back = pd.read_csv(rep.save(tmp_path / "r.csv"))
    assert np.allclose(back["mean"], rep.table["mean"])
    assert json.loads(rep.save(tmp_path / "r.json").read_text())["baseline"] == "<b>bold</b>"
    with pytest.raises(ValueError, match="r.xlsx"):
        rep.save(tmp_path / "r.xlsx")
    assert "<table" in rep._repr_html_() and "win / tie / loss" in str(rep)


def test_p_values_are_written_as_people_read_them():
    assert lookalike.format_p(0.0004) == "< 0.001" and lookalike.format_p(0.01234) == "0.012"
    assert lookalike.format_p(float("nan")) == ""


def test_cli_compares_several_runs(tmp_path, capsys):
    from lookalike.eval import ranking, trec

    qrels, runs = _data(12)
    trec.write_qrels(qrels, tmp_path / "q.qrels")
    for name, run in runs.items():
        ranking.write_run(run, tmp_path / f"{name}.run", tag=name)
    files = [str(tmp_path / f"{n}.run") for n in ("weak", "mid", "strong")]
    assert eval_cli.main([str(tmp_path / "q.qrels"), *files, "-m", "map", "--format", "csv"]) == 0
    got = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    want = lookalike.compare(qrels, runs, ["map"]).table
    assert list(got["system"]) == ["weak", "mid", "strong"] and np.allclose(got["mean"], want["mean"])
    assert np.allclose(got["p_holm"].fillna(-1), want["p_holm"].fillna(-1))
    assert eval_cli.main([str(tmp_path / "q.qrels"), *files, "--baseline", "strong.run", "-m", "map"]) == 0
    out = capsys.readouterr().out
    assert "Δ vs strong" in out and "win / tie / loss" in out
    with pytest.raises(SystemExit):
        eval_cli.main([str(tmp_path / "q.qrels"), *files, "-q"])
    assert "comparison table" in capsys.readouterr().err


def test_import_lookalike_stays_light_and_names_its_api():
    code = "import sys, lookalike; print('pandas' in sys.modules); print(sorted(lookalike.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "False"
    for name in ("Qrels", "Run", "read_qrels", "read_run", "parse_measure", "evaluate", "compare", "Report",
                 "open_run"):
        assert name in out[1] and getattr(lookalike, name) is not None
    with pytest.raises(AttributeError):
        lookalike.no_such_name  # noqa: B018


def test_read_helpers_and_parse_measure(tmp_path):
    (tmp_path / "q").write_text("q1 0 a 1\nq1 0 b 0\n")
    (tmp_path / "r").write_text("q1 Q0 b 1 2.0 mine\nq1 Q0 a 2 1.0 mine\n")
    q, r = lookalike.read_qrels(tmp_path / "q"), lookalike.read_run(tmp_path / "r")
    assert r.name == "mine" and lookalike.evaluate(q, r, ["recip_rank"]).mean()["recip_rank"] == 0.5
    one = lookalike.parse_measure("ndcg_cut.10")
    assert one == lookalike.parse_measure("nDCG@10") == lookalike.parse_measure("ndcg@10") and one.trec_name == "ndcg_cut_10"
    with pytest.raises(lookalike.MeasureError, match="names 2 measures"):
        lookalike.parse_measure("P.5,10")


def _finished(tmp_path: Path) -> Path:
    qrels, runs = _data(6)
    from lookalike.eval import ranking, trec

    root = tmp_path / "run"
    (root / "tables").mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"params": {"corpus": {"source": "demo"}}, "finished": "x"}))
    pd.DataFrame({"system": ["mid"], "value": [0.5], "extrapolated": [False]}).to_csv(root / "tables" / "t.csv",
                                                                                      index=False)
    (root / "qrels").mkdir()
    trec.write_qrels(qrels, root / "qrels" / "evidence.qrels")
    (root / "runs").mkdir()
    for name, run in runs.items():
        ranking.write_run(run, root / "runs" / f"{name}.run", tag=name)
    return root


def test_open_run_reads_a_finished_run_back(tmp_path):
    run = lookalike.open_run(_finished(tmp_path))
    assert run.tables == ["t"] and run["t"]["extrapolated"].dtype == bool
    assert set(run.runs()) == {"weak", "mid", "strong"} and run.params["corpus"]["source"] == "demo"
    rep = run.compare(["map"], baseline="weak", n_boot=200, n_perm=200)
    assert rep.n_queries == 6 and rep.baseline == "weak"
    with pytest.raises(KeyError, match="it has t"):
        run.table("headline")
    with pytest.raises(KeyError, match="it has evidence"):
        run.qrels("labels")
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        lookalike.open_run(tmp_path)


def test_the_plugin_example_imports_only_the_plugin_surface():
    tree = ast.parse((REPO / "examples" / "plugin_encoder" / "hashed_ocr.py").read_text())
    used = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("lookalike")}
    used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name.startswith("lookalike")}
    assert used == {"lookalike.plugin"}
    import lookalike.plugin as plugin

    for name in plugin.__all__:
        assert getattr(plugin, name) is not None
