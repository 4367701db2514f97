"""Stage functions called directly (no notebooks) on the CI configuration: each returns its
tables, figures and headline, and what it computes holds together."""

from __future__ import annotations


import pytest
from pathlib import Path
import pandas as pd
from lookalike.stages.base import Section


@pytest.mark.slow
def test_every_stage_returns_tables_figures_and_a_headline(results):
    ctx, out = results
    for module, res in out.items():
        assert res.tables and res.sentence, module
        assert (ctx.run_dir / "headlines" / f"{res.stage}.json").is_file()
        for name in res.tables:
            assert (ctx.run_dir / "tables" / f"{name}.csv").is_file()
        for name in res.figures:
            assert any((ctx.run_dir / "figures").glob(f"{name}.*")), name


@pytest.mark.slow
def test_what_depends_on_the_machine_stays_out_of_tables_and_notebooks(results):
    ctx, out = results
    machine = {"seconds", "units_per_s", "cache_hits", "cache_misses"}
    for module, res in out.items():
        for name, df in list(res.tables.items()) + list(res.show.items()):
            if hasattr(df, "columns"):
                assert not machine & set(df.columns), (module, name)
    timings = (ctx.run_dir / "timings" / "02_encode.csv").read_text().splitlines()
    assert timings[0] == "encoder,units,cache_hits,cache_misses,seconds,units_per_s" and len(timings) > 1


@pytest.mark.slow
def test_headlines_hold_no_nan_and_no_empty_names(results):
    _, out = results
    for module, res in out.items():
        said = res.sentence + " " + " ".join(map(str, res.numbers.values()))
        assert "nan" not in said.lower().replace("nanos", ""), (module, said)
        assert "()" not in said, (module, said)


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
