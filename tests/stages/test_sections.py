"""Every section of every stage, called on its own (the fast lane).

One small run of the built-in demo generator (ci size, the two cheapest encoders) goes through all
eight stages while every section function's inputs and results are recorded. Each section is then
called again on copies of its recorded inputs, outside its stage: it must give the same text, tables
and headline (a section depends on its arguments only), write only tables its stage's contract
declares, and say what it is in a docstring. Below, sections are also called on inputs changed to
hit their edge cases (no questions, one system, nothing planted)."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from lookalike.stages import contracts
from lookalike.stages.base import Section

from tests.stages.recording import (MODULES, SECTIONS, WRITES_FILES, WRITES_STATE, file_stamps, fresh_copy,
                                    recorded_input)


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
    before = file_stamps(ctx.run_dir)
    again = getattr(MODULES[module], name)(*fresh_copy(args), **fresh_copy(kwargs))
    after = file_stamps(ctx.run_dir)            # once: walking the run folder per file made each test take seconds
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


def test_the_recording_sees_a_section_that_is_not_deterministic(recorded, monkeypatch):
    """The second-call check can fail: a section drawing from an unseeded generator gives other tables."""
    units = recorded_input(recorded, "stratify_corpus", "sample_section", "units")
    fn = MODULES["stratify_corpus"].sample_section
    first = fn(units, 2, np.random.default_rng())[0].tables["sample"]
    assert any(not fn(units, 2, np.random.default_rng())[0].tables["sample"].equals(first) for _ in range(5))


def test_no_section_takes_the_stage_context():
    """Sections take what they use (frames, typed settings, earlier sections' values): only a stage's run()
    and its reading steps see the context."""
    for module, name in SECTIONS:
        params = inspect.signature(getattr(MODULES[module], name)).parameters
        assert "ctx" not in params, f"{module}.{name} takes the stage context"
        assert not any("StageContext" in str(p.annotation) for p in params.values()), f"{module}.{name}"


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


