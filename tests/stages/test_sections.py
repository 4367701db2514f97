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
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lookalike import params as P, stages
from lookalike.stages import contracts
from lookalike.stages.base import Section

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shapes"))
import shape_corpora  # noqa: E402 (the shape lane's cheap settings and params writer)

MODULES = {module: importlib.import_module(f"lookalike.stages.{module}") for module in stages.STAGES.values()}
SECTIONS = [(module, name) for module, mod in MODULES.items() for name, fn in inspect.getmembers(mod, inspect.isfunction)
            if name.endswith("_section") and fn.__module__ == mod.__name__]
# sections that add to the run's label store: called again in the same run folder they would find their
# own labels (0 added this time), so they are called again in a fresh folder
WRITES_STATE = {("judge_pool", "labels_section")}


# sections that write files when called, not when their stage is saved: none (labels_section appends to
# the label store, and is called in a fresh folder: WRITES_STATE)
WRITES_FILES: set = set()


def _files(root) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


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
def test_section_called_alone_gives_what_it_gave_in_its_stage(recorded, module, name, tmp_path):
    _, calls, _ = recorded
    (args, kwargs), out = calls[(module, name)]
    if (module, name) in WRITES_STATE:
        bound = inspect.signature(getattr(MODULES[module], name)).bind(*args, **kwargs)
        bound.arguments["run_dir"] = tmp_path
        args, kwargs = bound.args, bound.kwargs
    sec = out[0]
    assert isinstance(sec, Section) and sec.stage == MODULES[module].STAGE
    undeclared = contracts.undeclared_tables(sec.stage, sec.tables)
    assert not undeclared, f"{module}.{name} builds tables its contract does not declare: {undeclared}"
    ctx = recorded[0]
    before = _files(ctx.run_dir)
    again = getattr(MODULES[module], name)(*_copy(args), **_copy(kwargs))
    after = _files(ctx.run_dir)            # once: walking the run folder per file made each test take seconds
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert not changed or (module, name) in WRITES_FILES, (
        f"{module}.{name} wrote {changed[:5]} when called: a section writes through its result (after_save), "
        "when the stage is saved")
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
    units = recorded_input(recorded, "stratify_corpus", "sample_section", "units")
    fn = MODULES["stratify_corpus"].sample_section
    first = fn(units, 2, np.random.default_rng())[0].tables["sample"]
    assert any(not fn(units, 2, np.random.default_rng())[0].tables["sample"].equals(first) for _ in range(5))


def test_sample_takes_at_most_per_stratum_units_of_each_content_type(recorded):
    sec, sample = call(recorded, "stratify_corpus", "sample_section", per_stratum=1, rng=np.random.default_rng(0))
    units = recorded_input(recorded, "stratify_corpus", "sample_section", "units")
    assert len(sample) == units["content_type"].nunique() and sample["content_type"].is_unique
    assert sec.tables["sample"]["unit_id"].is_monotonic_increasing


def test_questions_section_says_when_there_are_none(recorded):
    sec, = call(recorded, "stratify_corpus", "questions_section", questions=pd.DataFrame())
    assert sec.text["questions"].strip() == "no questions supplied with this corpus"


def test_stratify_headline_without_templates_says_strata_are_by_content_type(recorded):
    strata = recorded_input(recorded, "stratify_corpus", "headline_section", "strata")
    sec, = call(recorded, "stratify_corpus", "headline_section", strata=strata.assign(template_id=""))
    assert "no template metadata: strata are by content type only" in sec.sentence
    assert sec.numbers["units"] == len(recorded_input(recorded, "stratify_corpus", "headline_section", "units"))


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
    sec, hard_runs, suff_hard, frames_hard, sufficiency, hard_sets = call(recorded, "metric_tables",
                                                                          "sufficiency_section")
    total = sufficiency["sufficient"] + sufficiency["supporting_only"] + sufficiency["neither"]
    assert len(sufficiency) and np.allclose(total, 1.0)
    assert set(suff_hard["system"]) == set(hard_runs) == set(frames_hard)
    assert set(sufficiency["negatives"]) == {"hard", "corpus"}
    # the hard columns hold exactly the questions whose candidate set is larger than their largest k
    inside = set(hard_sets.loc[hard_sets["in_hard"], "query_id"])
    assert (hard_sets.loc[hard_sets["in_hard"], "candidates"] > 5).all() and (suff_hard["n"] == len(inside)).all()
    assert all(set(run["query_id"]) == inside for run in hard_runs.values())


def test_planner_with_nothing_compared_says_so(recorded):
    significance = pd.DataFrame()
    sec, plan = call(recorded, "metric_tables", "planner_section", significance=significance)
    assert plan.empty and list(plan.columns) == MODULES["metric_tables"].PLANNER_COLUMNS
    assert sec.text["planner"].strip() == "nothing to compare"


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
    from lookalike.report import claims

    none = claims.claims_record([claims.verdict_claim(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())])["claims"][0]
    sec, = call(recorded, "metric_tables", "stage_headline_section", verdict=none)
    assert sec.sentence.startswith("No system can be named best under hard negatives") and sec.numbers == {}


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
    from lookalike.report import summary

    blocks = summary.blocks(MODULES["metric_tables"].summary_inputs(x, t, {"scored": {"text": "0 of 0"}}, "doc_id", "page"))
    assert [b.heading for b in blocks][0] == "What was scored"
    assert {b.heading for b in blocks} <= {"What was scored", "How the labels were made", "What the labels rest on",
                                           "People-judged questions a machine judge flagged"}
    full = summary.blocks(MODULES["metric_tables"].summary_inputs(recorded_input(recorded, "metric_tables", "summary_section",
                                                                            "x"), t, {"scored": {"text": "9 of 9"}},
                                                             "doc_id", "image"))
    assert len(full) > len(blocks) and full[0].text == "9 of 9"
    # the units' noun reaches every sentence of every block
    assert not any(re.search(r"\bpages?\b(?!-)", b.text + b.note) for b in full), [b.text for b in full]


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


def test_device_section_says_the_device_it_resolved():
    sec, = MODULES["encode"].device_section("cpu")
    assert sec.text["device"].startswith("device: cpu (")


def test_appearance_check_without_templates_says_it_does_not_apply(recorded):
    units = recorded_input(recorded, "encode", "appearance_section", "units")
    sec, = call(recorded, "encode", "appearance_section", units=units.assign(template_id=""))
    assert sec.text["appearance"].strip() == "no template metadata: the nearest-neighbour template check does not apply"
    sec, = call(recorded, "encode", "appearance_section")
    assert "nearest neighbour shares the template" in sec.text["appearance"]


def test_cleaning_in_drop_mode_leaves_the_flagged_questions_out(recorded):
    asked = recorded_input(recorded, "validate_questions", "cleaning_section", "questions")
    pointing = asked.iloc[:2].assign(query_id=["zz-1", "zz-2"], text=["Describe the chart above.",
                                                                    "What does the table on this page show?"])
    asked = pd.concat([asked, pointing], ignore_index=True)
    sec, kept = call(recorded, "validate_questions", "cleaning_section", questions=asked, mode="drop")
    flagged = set(sec.tables["question_cleaning"]["query_id"])
    assert {"zz-1", "zz-2"} <= flagged
    assert flagged and not flagged & set(kept["query_id"])
    assert set(kept["query_id"]) | flagged == set(asked["query_id"])
    assert f"{len(flagged)} left out of validation" in sec.text["cleaning"]
    flagged_only, kept_all = call(recorded, "validate_questions", "cleaning_section", questions=asked, mode="flag")
    assert len(kept_all) == len(asked)


def test_judged_at_k_is_a_share_and_falls_to_zero_without_labels(recorded):
    sec, qrels, judged = call(recorded, "judge_pool", "judged_section")
    cols = ["judged_1", "judged_5", "judged_10", "judged_20"]
    assert len(judged) and ((judged[cols] >= 0) & (judged[cols] <= 1)).all().all()
    current = recorded_input(recorded, "judge_pool", "judged_section", "current")
    _, _, none = call(recorded, "judge_pool", "judged_section", current=current.iloc[:0])
    assert (none[cols] == 0).all().all()


def test_leak_planted_section_without_a_planted_leak(recorded):
    gates = recorded_input(recorded, "leak_ablation", "planted_section", "gates")
    sec, = MODULES["leak_ablation"].planted_section(gates, None)
    assert sec.tables["leak_planted"].empty and "no planted leak on this corpus" in sec.text["planted"]
    sec, = call(recorded, "leak_ablation", "planted_section")          # the demo plants one: the gate must catch it
    planted = sec.tables["leak_planted"]
    assert (planted.loc[planted["input"] == "pixels + file name", "verdict"] == "LEAK").any()


def test_leak_gate_fails_a_pixel_system_whose_blind_queries_lose(recorded):
    """The gate section's verdict follows its input: caption-derived queries that find every unit while
    blind ones find none is a leak, whatever the threshold allows for noise."""
    ab = copy.copy(recorded_input(recorded, "leak_ablation", "gate_section", "ab"))
    pq = ab.pixel_pq.copy()
    pq["recall_10"] = np.where(pq["query_set"] == "blind", 0.0, 1.0)
    ab.pixel_pq = pq
    per_query = recorded_input(recorded, "leak_ablation", "gate_section", "per_query")
    sec, gates, verdict, decision = call(recorded, "leak_ablation", "gate_section", ab=ab, per_query=per_query)
    assert decision == "LEAK" and "LEAK" in set(sec.tables["leak_gate"]["verdict"])


def test_stage_04_headline_without_scored_questions(recorded):
    top1 = recorded_input(recorded, "hard_negatives", "headline_section", "top1_table")
    docs = recorded_input(recorded, "hard_negatives", "headline_section", "doc_table")
    sec, = call(recorded, "hard_negatives", "headline_section", top1_table=top1.iloc[:0], doc_table=docs.iloc[:0])
    assert "no page-single questions scored" in sec.sentence


def test_validate_setup_says_when_the_second_judge_is_the_first(recorded):
    judge = recorded_input(recorded, "validate_questions", "setup_section", "judge")
    sec, = MODULES["validate_questions"].setup_section(judge, None, judge.name)
    assert "a judge is never compared with itself" in sec.text["setup"]
    sec, = MODULES["validate_questions"].setup_section(judge, None, "")
    assert "never compared" not in sec.text["setup"] and "second judge: none" in sec.text["setup"]


def test_a_stage_speaks_of_photos_where_the_units_are_photos():
    """Sections build in 'page'; a stage whose units are photos says photo in every sentence, table,
    shown frame and headline it adds — and leaves field names (a column called page) and evidence
    structures (page-single) as they are."""
    import pandas as pd

    from lookalike.report import tables as readable
    from lookalike.stages.base import Section, StageResult

    sec = Section("02_encode", "look")
    sec.say("40 pages by OCR; page-single questions: 3")
    sec.html_table("look", pd.DataFrame({"page": [1], "text": ["1 page by OCR"]}))
    sec.show["encode"] = pd.DataFrame({"page": [1], "text": ["40 pages by OCR"]})
    sec.headline("the best system finds 3 pages", numbers={"pages with text": 40})
    res = StageResult("02_encode", "t", Path("."), noun="photo")
    res.add(sec)
    assert res.text["look"] == "40 photos by OCR; page-single questions: 3\n"
    assert ">page</th>" in res.html["look"]
    assert "1 photo by OCR" in res.html["look"] and "1 page by OCR" not in res.html["look"]
    shown = res.show["encode"]
    assert isinstance(shown, readable.Readable) and list(shown.df.columns) == ["page", "text"]
    assert shown.df["text"].tolist() == ["40 photos by OCR"]
    assert res.sentence == "the best system finds 3 photos" and res.numbers == {"photos with text": 40}
    res.section("look").say("one more page")
    assert res.text["look"].endswith("one more photo\n")
    # on pages nothing changes
    page = StageResult("02_encode", "t", Path("."))
    page.add(Section("02_encode", "look"))
    page.section("look").say("40 pages")
    assert page.text["look"] == "40 pages\n"


def test_a_system_the_params_no_longer_have_is_not_read_from_an_earlier_runs_files(recorded, tmp_path):
    """Run files an earlier run left in the folder (an encoder or a +rerank taken out of the params
    since) were read by stage 07 as systems of this run: it globbed runs/*+rerank.run and
    runs_validated/*.run. Now stage 02 and 06 empty their run folders before writing, and stage 07 takes
    the +rerank / +split systems from stage 02's systems table."""
    import shutil

    ctx, _, _ = recorded
    run_dir = tmp_path / "run"
    shutil.copytree(ctx.run_dir, run_dir)
    for folder, name in (("runs", "gone+rerank"), ("runs_validated", "gone"), ("runs_hard", "gone")):
        shutil.copy(run_dir / folder / "ocr-bm25.run", run_dir / folder / f"{name}.run")
    again = stages.context(run_dir, ctx.params)
    inputs = MODULES["metric_tables"].read_inputs(again)
    assert "gone+rerank" not in inputs.external
    MODULES["judge_pool"].run(again).save()
    MODULES["metric_tables"].run(again).save()
    assert not (run_dir / "runs_validated" / "gone.run").exists() and not (run_dir / "runs_hard" / "gone.run").exists()
    assert "gone" not in set(pd.read_csv(run_dir / "tables" / "sufficiency.csv")["system"])
    assert sorted(p.stem for p in (run_dir / "runs_validated").glob("*.run")) == sorted(
        p.stem for p in (ctx.run_dir / "runs_validated").glob("*.run"))
