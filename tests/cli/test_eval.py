import subprocess
import sys

import pytest
from lookalike.cli.eval import main
import numpy as np
import pandas as pd
import lookalike
from lookalike.cli import eval as eval_cli
from tests.test_api import _data

QRELS = "q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq2 0 x 1\nq3 0 z 0\n"
RUN = ("q1 Q0 a 1 3.0 mine\nq1 Q0 b 2 2.0 mine\nq1 Q0 c 3 1.0 mine\n"
       "q2 Q0 y 1 2.0 mine\nq2 Q0 x 2 1.0 mine\nq9 Q0 x 1 1.0 mine\n")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    return tmp_path


@pytest.mark.shared_data
def test_default_output_is_trec_evals(shared_data, capsys):
    d = shared_data / "trec_eval"
    assert main([str(d / "qrels.test"), str(d / "results.test")]) == 0
    assert capsys.readouterr().out == (d / "out.test").read_text()


@pytest.mark.shared_data
def test_per_query_complete_and_cutoff_options(shared_data, capsys):
    d = shared_data / "trec_eval"
    assert main(["-q", "-c", "-M100", "-m", "official", str(d / "qrels.test"), str(d / "results.trunc")]) == 0
    ours = capsys.readouterr().out.splitlines()
    expected = {tuple(line.split("\t")[:2]): line for line in (d / "out.test.aqcM").read_text().splitlines()}
    for line in ours:
        key = tuple(line.split("\t")[:2])
        if key[0].strip() != "runid":
            assert expected[key] == line


def test_trec_eval_measure_forms_and_notes(files, capsys):
    assert main(["-q", "-m", "P.1,2", "-mrecip_rank", str(files / "qrels"), str(files / "run")]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    # trec_eval's order: recip_rank comes before P in its measure table, whatever the command line says
    assert lines[0] == f"{'recip_rank':<22}\tq1\t1.0000" and lines[1] == f"{'P_1':<22}\tq1\t1.0000"
    assert f"{'recip_rank':<22}\tall\t0.7500" in lines
    assert "1 run queries are not in the qrels and were not scored: q9" in err
    assert "1 qrels queries are missing from the run" in err and "q3" in err


def test_level_option(files, capsys):
    assert main(["-l2", "-m", "num_rel", str(files / "qrels"), str(files / "run")]) == 0
    assert capsys.readouterr().out.strip() == f"{'num_rel':<22}\tall\t1"


def test_group_by_and_ci(files, capsys):
    (files / "groups.csv").write_text("query_id,structure\nq1,page-single\nq2,cross-doc\nq3,cross-doc\n")
    assert main(["-m", "P.1", "--group-by", f"{files / 'groups.csv'}:structure", "--ci",
                 str(files / "qrels"), str(files / "run")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("P_1") and out[0].split("\t")[1:3] == ["all", "0.5000"] and len(out[0].split("\t")) == 5
    assert f"{'num_q':<22}\tcross-doc\t1" in out and f"{'num_q':<22}\tpage-single\t1" in out
    assert f"{'num_groups':<22}\tmacro\t2" in out
    assert f"{'P_1':<22}\tmacro\t0.5000" in out


@pytest.mark.parametrize("run, message", [
    ("q1 Q0 a 1 1.0 r\nq1 Q0 a 2 0.5 r\n", "run:2: unit 'a' listed twice for query 'q1'"),
    ("q1 Q0 a 1 NaN r\n", "run:1: score 'NaN' is not finite"),
    ("q1 Q0 a 1\n", "run:1: expected 6 fields"),
    ("", "run: empty file"),
])
def test_bad_input_exits_2_naming_file_and_line(files, capsys, run, message):
    (files / "run").write_text(run)
    assert main([str(files / "qrels"), str(files / "run")]) == 2
    assert message in capsys.readouterr().err


def test_unknown_measure_exits_2(files, capsys):
    assert main(["-m", "nDGC@10", str(files / "qrels"), str(files / "run")]) == 2
    assert "unknown measure 'nDGC@10'" in capsys.readouterr().err


def test_runs_as_a_module(files):
    res = subprocess.run([sys.executable, "-m", "lookalike", "eval", "-m", "map", str(files / "qrels"),
                          str(files / "run")], capture_output=True, text=True, check=True)
    assert res.stdout.startswith("map")


def test_all_trec_prints_the_runid_and_chosen_measures_do_not(files, capsys):
    assert main(["-m", "all_trec", str(files / "qrels"), str(files / "run")]) == 0
    assert f"{'runid':<22}\tall\tmine" in capsys.readouterr().out.splitlines()
    assert main(["-m", "P.5", str(files / "qrels"), str(files / "run")]) == 0
    assert "runid" not in capsys.readouterr().out


def test_ranx_and_ir_measures_spellings_on_the_command_line(files, capsys):
    assert main(["-m", "nDCG@10 P@5", "-m", "mrr", "-m", "hit_rate@5", str(files / "qrels"), str(files / "run")]) == 0
    names = [line.split("\t")[0].strip() for line in capsys.readouterr().out.splitlines()]
    assert names == ["nDCG@10", "P@5", "mrr", "hit_rate@5"]
    assert main(["-m", "ndcg@1O", str(files / "qrels"), str(files / "run")]) == 2
    assert main(["-m", "precison@5", str(files / "qrels"), str(files / "run")]) == 2
    assert "did you mean precision@5?" in capsys.readouterr().err


@pytest.mark.shared_data
@pytest.mark.parametrize("options, qrels, run, expected", [
    ([], "qrels.test", "results.test", "out.test.a"),
    (["-q"], "qrels.test", "results.test", "out.test.aq"),
    (["-q", "-c"], "qrels.test", "results.trunc", "out.test.aqc"),
    (["-q", "-c", "-M100"], "qrels.test", "results.trunc", "out.test.aqcM"),
    (["-q", "-l2", "-m", "relstring.20"], "qrels.rel_level", "results.test", "out.test.aql"),
])
def test_all_trec_prints_every_line_of_trec_evals_output(shared_data, capsys, options, qrels, run, expected):
    # trec_eval 10.0's own test commands (EXPECTED_COMMANDS.txt): every line identical, in its order,
    # infAP, binG, G, ndcg_rel, Rndcg and the per-query relstring included
    d = shared_data / "trec_eval"
    assert main(["-m", "all_trec", *options, str(d / qrels), str(d / run)]) == 0
    out, err = capsys.readouterr()
    assert out == (d / expected).read_text()
    assert "not computed" not in err


@pytest.mark.shared_data
def test_lines_come_in_trec_evals_order_whatever_the_command_line_says(shared_data, capsys):
    d = shared_data / "trec_eval"
    assert main(["-m", "P.5", "-m", "map", "-m", "relstring", "-q", str(d / "qrels.test"), str(d / "results.test")]) == 0
    names = [line.split("\t")[0].strip() for line in capsys.readouterr().out.splitlines()]
    assert names[:3] == ["map", "P_5", "relstring"] and names[-2:] == ["map", "P_5"]


def test_csv_and_json_give_the_text_outputs_numbers_at_full_precision(files, capsys):
    import io
    import json

    import pandas as pd

    args = ["-q", "-m", "P.1,2", "-m", "map", str(files / "qrels"), str(files / "run")]
    assert main(args) == 0
    text = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert main(["--format", "csv", *args]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype={"query": str})
    assert list(table.columns) == ["measure", "query", "value"] and len(table) == len(text)
    for (measure, query, value), row in zip(text, table.itertuples()):
        assert (measure.strip(), query) == (row.measure, row.query) and f"{row.value:.4f}" == value
    assert main(["--format", "json", "-m", "all_trec", str(files / "qrels"), str(files / "run")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["runid"] == "mine" and all(set(r) == {"measure", "query", "value"} for r in data["rows"])
    assert not any(r["measure"] == "runid" for r in data["rows"])


def test_csv_with_groups_and_intervals(files, capsys):
    import io

    import pandas as pd

    (files / "groups.csv").write_text("query_id,structure\nq1,page-single\nq2,cross-doc\nq3,cross-doc\n")
    assert main(["--format", "csv", "-m", "P.1", "--ci", "--group-by", f"{files / 'groups.csv'}:structure",
                 str(files / "qrels"), str(files / "run")]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(table.columns) == ["measure", "query", "value", "ci_lo", "ci_hi"]
    assert table.loc[table["measure"] == "num_groups", "value"].tolist() == [2]


@pytest.mark.shared_data
def test_measure_parameters_print_trec_evals_lines(shared_data, capsys):
    """trec_eval's own measure-parameter test (EXPECTED_COMMANDS: out.test.meas_params): cutoff lists in
    any order, utility's coefficients, 11pt_avg's recall points and ndcg's gain map — every line equal."""
    d = shared_data / "trec_eval"
    args = ["-q", "-miprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m", "recall.20,2000",
            "-m", "Rprec_mult.5.0,0.2,0.35", "-mutility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75", "-mndcg.1=3,2=9,4=4.5",
            "-mndcg_cut.10,20,23.4", "-msuccess.2,5,20", str(d / "qrels.test"), str(d / "results.test")]
    assert main(args) == 0
    assert capsys.readouterr().out == (d / "out.test.meas_params").read_text()


def test_measure_parameters_by_hand(files, capsys):
    """q1 ranks a (grade 2), b (0), c (1); q2 ranks y (unjudged), x (1); q3 has no ranking."""
    assert main(["-q", "-mutility.3,-2,-1,0.5", "-N", "10", "-mndcg.1=5,0=-1", "-m11pt_avg.0.5,1",
                 str(files / "qrels"), str(files / "run")]) == 0
    got = {(line.split("\t")[0].strip(), line.split("\t")[1]): float(line.split("\t")[2])
           for line in capsys.readouterr().out.splitlines()}
    # utility: 3 x rel_ret - 2 x nonrel_ret - 1 x rel_not_ret + 0.5 x (N + rel_ret - ret - rel)
    assert got[("utility_3,-2,-1,0.5", "q1")] == 3 * 2 - 2 * 1 - 0 + 0.5 * (10 + 2 - 3 - 2)
    assert got[("utility_3,-2,-1,0.5", "q2")] == 3 * 1 - 2 * 1 - 0 + 0.5 * (10 + 1 - 2 - 1)
    # gains: grade 2 keeps 2, grade 1 -> 5, grade 0 -> -1 (counted in the ranking, never in the ideal)
    import math

    dcg = 2 / math.log2(2) - 1 / math.log2(3) + 5 / math.log2(4)
    ideal = 5 / math.log2(2) + 2 / math.log2(3)
    assert got[("ndcg_1=5,0=-1", "q1")] == pytest.approx(round(dcg / ideal, 4))
    # interpolated precision at recall 0.5 (a at rank 1: 1) and at recall 1 (c at rank 3: 2/3)
    assert got[("11pt_avg_0.5,1", "q1")] == pytest.approx(round((1 + 2 / 3) / 2, 4))


@pytest.mark.parametrize("spec, words", [
    ("utility.1,-1,0", "four coefficients"),
    ("ndcg.1:3", "level=gain pairs"),
    ("ndcg.1=3,1=4", "two gains"),
    ("11pt_avg.0.5,2", "between 0 and 1"),
    ("P.5,x", "'x' is not a number"),
])
def test_malformed_measure_parameters_are_refused(files, capsys, spec, words):
    assert main(["-m", spec, str(files / "qrels"), str(files / "run")]) == 2
    assert words in capsys.readouterr().err


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


def test_a_runs_own_files_are_never_warned_about_a_page_base():
    """`lookalike eval` warned "the qrels from 0 and the run from 1" on a run's own runs/ and qrels/: both count
    from 1, but the run held the judged pages' neighbours (look-alikes) more often than the judged pages."""
    from lookalike.cli.eval import page_base_note

    judged = ["acme:2", "acme:4", "beta:3"]
    ranked = ["acme:1", "acme:3", "acme:5", "beta:4", "beta:2", "gamma:1"]      # neighbours, never the pages
    assert page_base_note(judged, ranked) == ""
    # the ids disagree: the qrels use page 0, the run never does
    assert "the qrels from 0 and the run from 1" in page_base_note(["a:0", "b:2", "c:4"], ["a:1", "b:3", "c:5"])
