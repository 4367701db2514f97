"""Stage functions called directly (no notebooks) on the CI configuration: each returns its
tables, figures and headline, and what it computes holds together."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from conftest import REPO
from lookalike import params, stages

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("stages") / "ci"
    ctx = stages.context(run_dir, params.load_params(REPO / "params" / "ci.yaml"))
    out = {}
    for _notebook, module in stages.STAGES.items():
        res = importlib.import_module(f"lookalike.stages.{module}").run(ctx)
        res.save()
        out[module] = res
    return ctx, out


def test_every_stage_returns_tables_figures_and_a_headline(results):
    ctx, out = results
    for module, res in out.items():
        assert res.tables and res.sentence, module
        assert (ctx.run_dir / "headlines" / f"{res.stage}.json").is_file()
        for name in res.tables:
            assert (ctx.run_dir / "tables" / f"{name}.csv").is_file()
        for name in res.figures:
            assert any((ctx.run_dir / "figures").glob(f"{name}.*")), name


def test_stratify_keeps_every_demo_unit_and_samples_each_stratum(results):
    _, out = results
    units, sample = out["stratify_corpus"].tables["units"], out["stratify_corpus"].tables["sample"]
    assert len(units) == units["unit_id"].nunique() > 100
    assert set(sample["content_type"]) == set(units["content_type"])


def test_leak_gate_passes_on_the_clean_ci_run(results):
    _, out = results
    assert "PASS" in out["leak_ablation"].text["gate"]
    table = out["leak_ablation"].tables["leak_ablation"]
    assert set(table["index"]) == {"image", "caption", "both"}


def test_validation_statuses_and_validated_set_agree(results):
    _, out = results
    v, validated = out["validate_questions"].tables["question_validation"], out["validate_questions"].tables["questions_validated"]
    kept = v[v["slice"] != "dropped"]["query_id"]
    assert sorted(kept) == sorted(validated["query_id"])


def test_sufficiency_outcomes_add_up_to_one(results):
    _, out = results
    s = out["metric_tables"].tables["sufficiency"]
    total = s["sufficient"] + s["supporting_only"] + s["neither"]
    assert np.allclose(total, 1.0) and (s["n"] > 0).all()


def test_mined_rules_pick_the_same_count(results):
    _, out = results
    rules = out["mined_candidates"].tables["negative_rules"]
    assert len(rules) and (rules["n_negatives"] <= rules["n_queries"] * 4).all()


def test_what_depends_on_the_machine_stays_out_of_tables_and_notebooks(results):
    ctx, out = results
    machine = {"seconds", "units_per_s", "cache_hits", "cache_misses"}
    for module, res in out.items():
        for name, df in list(res.tables.items()) + list(res.show.items()):
            if hasattr(df, "columns"):
                assert not machine & set(df.columns), (module, name)
    timings = (ctx.run_dir / "timings" / "02_encode.csv").read_text().splitlines()
    assert timings[0] == "encoder,units,cache_hits,cache_misses,seconds,units_per_s" and len(timings) > 1


def test_stage_03_labels_its_pool_with_the_three_labels(results):
    _, out = results
    judgements = out["leak_ablation"].tables["judgements"]
    assert set(judgements["label"]) <= {"sufficient", "supporting", "irrelevant"}
    assert (judgements["grade"] == judgements["label"].map({"sufficient": 2, "supporting": 1, "irrelevant": 0})).all()
    assert list(out["leak_ablation"].tables["judging_sheet"].columns) == ["item", "query", "label"]


def test_headlines_hold_no_nan_and_no_empty_names(results):
    _, out = results
    for module, res in out.items():
        said = res.sentence + " " + " ".join(map(str, res.numbers.values()))
        assert "nan" not in said.lower().replace("nanos", ""), (module, said)
        assert "()" not in said, (module, said)
