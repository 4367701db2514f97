"""Every section of every stage, called on its own (the fast lane).

One small run of the built-in demo generator (ci size, the two cheapest encoders) goes through all
eight stages while every section function's inputs and results are recorded. Each section is then
called again on copies of its recorded inputs, outside its stage: it must give the same text, tables
and headline (a section depends on its arguments only), write only tables its stage's contract
declares, and say what it is in a docstring. Below, sections are also called on inputs changed to
hit their edge cases (no questions, one system, nothing planted)."""

from __future__ import annotations

import copy
import importlib
import inspect
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lookalike import params as P, stages
from lookalike.stages import contracts as K
from lookalike.stages.base import Section

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shapes"))
import shape_corpora  # noqa: E402 (the shape lane's cheap settings and params writer)

MODULES = {module: importlib.import_module(f"lookalike.stages.{module}") for module in stages.STAGES.values()}
SECTIONS = [(module, name) for module, mod in MODULES.items() for name, fn in inspect.getmembers(mod, inspect.isfunction)
            if name.endswith("_section") and fn.__module__ == mod.__name__]
# sections that add to the run's label store or its caches: called again they find their own earlier
# writes (0 labels added this time), so they are checked by the run, not by a second call
WRITES_STATE = {("judge_pool", "labels_section"), ("judge_pool", "store_section")}


def _copy(value):
    try:
        return copy.deepcopy(value)
    except Exception:   # judges, caches, open stores: passed as they are
        return value


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sections")
    params = shape_corpora._params(folder, "sections", "corpus:\n  source: demo\n  demo_size: ci\n"
                                                      "encode:\n  encoders: [ocr-bm25, appearance]\n"
                                                      "mining:\n  retriever: ocr-bm25\n")
    ctx = stages.context(folder / "run", P.load_params(params))
    calls: dict[tuple[str, str], tuple] = {}
    mp = pytest.MonkeyPatch()
    for module, name in SECTIONS:
        fn = getattr(MODULES[module], name)

        def wrapped(*args, _fn=fn, _key=(module, name), **kwargs):
            inputs = (_copy(args), _copy(kwargs))
            out = _fn(*args, **kwargs)
            calls[_key] = (inputs, out)
            return out

        mp.setattr(MODULES[module], name, wrapped)
    results = {}
    try:
        for module in stages.STAGES.values():
            res = MODULES[module].run(ctx)
            res.save()
            results[module] = res
    finally:
        mp.undo()
    return ctx, calls, results


def _frames_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].to_csv(index=False) == b[k].to_csv(index=False) for k in a)


@pytest.mark.parametrize("module,name", SECTIONS, ids=[f"{m}.{n}" for m, n in SECTIONS])
def test_section_has_a_docstring_and_runs_in_its_stage(recorded, module, name):
    _, calls, _ = recorded
    doc = inspect.getdoc(getattr(MODULES[module], name)) or ""
    assert len(doc) > 30 and "TODO" not in doc, f"{module}.{name} says too little of itself: {doc!r}"
    assert (module, name) in calls, f"{module}.{name} is never called by its stage's run()"


@pytest.mark.parametrize("module,name", SECTIONS, ids=[f"{m}.{n}" for m, n in SECTIONS])
def test_section_called_alone_gives_what_it_gave_in_its_stage(recorded, module, name):
    _, calls, _ = recorded
    (args, kwargs), out = calls[(module, name)]
    sec = out[0]
    assert isinstance(sec, Section) and sec.stage == MODULES[module].STAGE
    undeclared = K.undeclared_tables(sec.stage, sec.tables)
    assert not undeclared, f"{module}.{name} builds tables its contract does not declare: {undeclared}"
    if (module, name) in WRITES_STATE:
        pytest.skip("adds to the run's label store: a second call finds its own labels")
    again = getattr(MODULES[module], name)(*_copy(args), **_copy(kwargs))
    assert again[0].text == sec.text
    assert _frames_equal(again[0].tables, sec.tables)
    assert (again[0].sentence, again[0].numbers) == (sec.sentence, sec.numbers)
    assert sorted(again[0].figures) == sorted(sec.figures)
    assert len(again) == len(out)


def test_every_stage_run_is_short_and_only_orchestrates():
    """A stage's run() reads its inputs and calls its sections: at most 60 lines each."""
    for module, mod in MODULES.items():
        lines, _ = inspect.getsourcelines(mod.run)
        assert len(lines) <= 60, f"{module}.run is {len(lines)} lines"


def call(recorded, module: str, name: str, **changed):
    """A section called on its recorded inputs, with the named arguments changed."""
    _, calls, _ = recorded
    (args, kwargs), _ = calls[(module, name)]
    fn = getattr(MODULES[module], name)
    bound = inspect.signature(fn).bind(*_copy(args), **_copy(kwargs))
    bound.arguments.update(changed)
    return fn(*bound.args, **bound.kwargs)


def recorded_input(recorded, module: str, name: str, arg: str):
    _, calls, _ = recorded
    (args, kwargs), _ = calls[(module, name)]
    return inspect.signature(getattr(MODULES[module], name)).bind(*args, **kwargs).arguments[arg]


def test_the_recording_sees_a_section_that_is_not_deterministic(recorded, monkeypatch):
    """The second-call check can fail: a section drawing from an unseeded generator gives other tables."""
    units = recorded_input(recorded, "stratify", "sample_section", "units")
    fn = MODULES["stratify"].sample_section
    first = fn(units, 2, np.random.default_rng())[0].tables["sample"]
    assert any(not fn(units, 2, np.random.default_rng())[0].tables["sample"].equals(first) for _ in range(5))


def test_sample_takes_at_most_per_stratum_units_of_each_content_type(recorded):
    sec, sample = call(recorded, "stratify", "sample_section", per_stratum=1, rng=np.random.default_rng(0))
    units = recorded_input(recorded, "stratify", "sample_section", "units")
    assert len(sample) == units["content_type"].nunique() and sample["content_type"].is_unique
    assert sec.tables["sample"]["unit_id"].is_monotonic_increasing


def test_questions_section_says_when_there_are_none(recorded):
    sec, = call(recorded, "stratify", "questions_section", questions=pd.DataFrame())
    assert sec.text["questions"].strip() == "no questions supplied with this corpus"


def test_stratify_headline_without_templates_says_strata_are_by_content_type(recorded):
    strata = recorded_input(recorded, "stratify", "headline_section", "strata")
    sec, = call(recorded, "stratify", "headline_section", strata=strata.assign(template_id=""))
    assert "no template metadata: strata are by content type only" in sec.sentence
    assert sec.numbers["units"] == len(recorded_input(recorded, "stratify", "headline_section", "units"))


def test_top1_random_chance_is_one_over_the_candidates(recorded):
    sec, table = call(recorded, "metric_tables", "top1_random_section")
    questions = recorded_input(recorded, "metric_tables", "top1_random_section", "questions")
    distractors = recorded_input(recorded, "metric_tables", "top1_random_section", "distractors")
    single = questions[questions["evidence_structure"] == "page-single"]
    rand = distractors[distractors["axis"] == "random"].groupby("query_id")["unit_id"].apply(set)
    expected = np.mean([1 / len({g} | rand.get(q, set())) for q, g in zip(single["query_id"],
                                                                          single["evidence_unit_ids"])])
    assert len(table) and np.allclose(table["chance"], expected)
    assert ((table["top1_lo"] <= table["top1"]) & (table["top1"] <= table["top1_hi"])).all()
    assert (table["n"] == len(single)).all()


def test_top1_random_without_page_single_questions_is_a_sentence(recorded):
    questions = recorded_input(recorded, "metric_tables", "top1_random_section", "questions")
    sec, table = call(recorded, "metric_tables", "top1_random_section",
                      questions=questions.assign(evidence_structure="multi-page"))
    assert table.empty and "no page-single questions" in sec.text["top1_random"]


def test_sufficiency_outcomes_add_up_to_one_per_system_and_k(recorded):
    sec, hard_runs, suff_hard, frames_hard, sufficiency = call(recorded, "metric_tables", "sufficiency_section")
    total = sufficiency["sufficient"] + sufficiency["supporting_only"] + sufficiency["neither"]
    assert len(sufficiency) and np.allclose(total, 1.0)
    assert set(suff_hard["system"]) == set(hard_runs) == set(frames_hard)
    assert set(sufficiency["negatives"]) == {"hard", "corpus"}


def test_planner_with_nothing_compared_says_so(recorded):
    significance = pd.DataFrame()
    sec, plan = call(recorded, "metric_tables", "planner_section", significance=significance)
    assert plan.empty and list(plan.columns) == MODULES["metric_tables"].PLANNER_COLUMNS
    assert sec.text["planner"].strip() == "nothing to compare"


def test_planner_words_say_not_measured_when_no_pair_varies():
    plan = pd.DataFrame([{"measure": "sufficient@5 (hard)", "system": "a", "minus": "b", "n": 12, "difference": 0.0,
                          "se": 0.0, "resolvable": 0.0, "n_needed": np.inf}])
    assert MODULES["metric_tables"].planner_words(plan, None).startswith("Not measured: with 12 validated questions")
    assert MODULES["metric_tables"].planner_words(plan.iloc[:0], None) == ""


def test_fusion_with_one_component_traces_nothing(recorded):
    base = recorded_input(recorded, "metric_tables", "fusion_section", "base")
    sec, counts = call(recorded, "metric_tables", "fusion_section", base=list(base)[:1])
    assert counts.empty and "fewer than two component systems" in sec.text["fusion"]
    assert sec.tables["fusion_trace"].empty


def test_planted_section_on_a_corpus_that_plants_nothing(recorded):
    x = copy.copy(recorded_input(recorded, "metric_tables", "planted_section", "x"))
    x.earlier = dict(x.earlier, planted=pd.DataFrame())
    sec, effects = call(recorded, "metric_tables", "planted_section", x=x)
    assert effects.empty and "planted_effects" not in sec.tables
    assert "this corpus plants nothing" in sec.text["planted"]


def test_planted_section_on_the_demo_recovers_what_it_planted(recorded):
    sec, effects = call(recorded, "metric_tables", "planted_section")
    assert len(effects) and set(sec.tables) == {"planted_effects"}
    assert "ok" in effects.columns and effects["effect"].is_unique


def test_source_structure_names_a_missing_column(recorded):
    sec, cells = call(recorded, "metric_tables", "source_structure_section", source_column="no_such_column")
    assert cells.empty and "'no_such_column' is not a units column" in sec.text["source_structure"]
    assert "07_source_structure" not in sec.figures


def test_stage_07_headline_without_validated_questions(recorded):
    suff = recorded_input(recorded, "metric_tables", "stage_headline_section", "suff_hard")
    sec, = call(recorded, "metric_tables", "stage_headline_section", suff_hard=suff.iloc[:0])
    assert sec.sentence.startswith("No validated questions to score.") and sec.numbers == {}


def test_headline_table_has_one_row_per_hard_system_with_its_n(recorded):
    sec, headline = call(recorded, "metric_tables", "headline_section")
    suff = recorded_input(recorded, "metric_tables", "headline_section", "suff_hard")
    assert sorted(headline["system"]) == sorted(suff["system"].unique())
    n = suff[suff["k"] == 1].set_index("system")["n"]
    assert all(int(r["n (validated)"]) == int(n[r["system"]]) for _, r in headline.iterrows())


def test_summary_blocks_without_scored_questions_keep_only_what_was_scored_and_the_labels(recorded):
    x = copy.copy(recorded_input(recorded, "metric_tables", "summary_section", "x"))
    t = recorded_input(recorded, "metric_tables", "summary_section", "t")
    x.validated = x.validated.iloc[:0]
    blocks = MODULES["metric_tables"].summary_blocks(x, t, "doc_id", "demo")
    assert [b["heading"] for b in blocks][0] == "What was scored"
    assert {b["heading"] for b in blocks} <= {"What was scored", "How the labels were made", "What the labels rest on",
                                              "People-judged questions a machine judge flagged"}


def test_section_results_merge_into_the_stage_result_and_refuse_a_table_built_twice():
    from lookalike.stages.base import StageResult

    res = StageResult("01_stratify_corpus", "t", Path("."))
    a, b = Section("01_stratify_corpus", "one"), Section("01_stratify_corpus", "two")
    a.say("hello")
    a.table("units", pd.DataFrame({"unit_id": ["u1"]}))
    b.table("units", pd.DataFrame({"unit_id": ["u2"]}))
    assert res.add(a, 1, 2) == (1, 2) and res.text == {"one": "hello\n"} and list(res.tables) == ["units"]
    with pytest.raises(ValueError, match="builds units again"):
        res.add(b)
    with pytest.raises(TypeError, match="saved with its stage"):
        a.save()


def test_no_section_takes_the_stage_context():
    """Sections take what they use (frames, typed settings, earlier sections' values): only a stage's run()
    and its reading steps see the context."""
    for module, name in SECTIONS:
        params = inspect.signature(getattr(MODULES[module], name)).parameters
        assert "ctx" not in params, f"{module}.{name} takes the stage context"
        assert not any("StageContext" in str(p.annotation) for p in params.values()), f"{module}.{name}"
