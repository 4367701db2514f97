"""Declared contracts between stages (lookalike.stages.contracts): the source of every stage reads and
writes exactly the tables its contract names, every table read is written by an earlier stage, and
the runtime checks refuse what a contract does not declare."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pandas as pd
import pytest

from lookalike.stages import contracts
from lookalike.stages.base import StageResult

LIB = Path(contracts.__file__).resolve().parent


def source_tables(module: str) -> tuple[set[str], set[str]]:
    """(tables read, tables written) by a stage module, from its source: read / optional / ctx.table /
    ctx.has_table / ctx.optional_table calls (ctx.units() reads units) and res.table calls."""
    reads, writes = set(), set()
    for node in ast.walk(ast.parse((LIB / f"{module}.py").read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if name == "units" and owner == "ctx":
            reads.add("units")
        if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
            continue
        table = node.args[0].value
        if (name in ("read", "optional") and not owner) or (owner == "ctx" and name in ("table", "has_table",
                                                                                           "optional_table")):
            reads.add(table)
        elif owner in ("res", "sec") and name == "table":
            writes.add(table)
    return reads, writes


@pytest.mark.parametrize("stage", contracts.STAGES)
def test_each_stage_reads_and_writes_what_it_declares(stage):
    c = contracts.CONTRACTS[stage]
    reads, writes = source_tables(c.module)
    assert reads == set(c.reads), f"{stage}: read but not declared {sorted(reads - c.reads)}, " \
                                  f"declared but not read {sorted(c.reads - reads)}"
    assert writes == set(c.writes), f"{stage}: written but not declared {sorted(writes - c.writes)}, " \
                                    f"declared but not written {sorted(c.writes - writes)}"


def test_every_table_a_stage_reads_is_written_before_it():
    assert contracts.unmet_reads(contracts.CONTRACTS) == []


def test_the_order_check_fails_when_a_stage_reads_a_later_table():
    """The check can fail: stage 04 reading stage 06's pool, and a stage reading a table nobody writes."""
    broken = dict(contracts.CONTRACTS)
    c = broken["04_hard_negatives"]
    broken["04_hard_negatives"] = contracts.Contract(c.module, c.reads | {"pool", "no_such_table"}, c.writes, c.files)
    assert contracts.unmet_reads(broken) == ["04_hard_negatives reads tables/no_such_table.csv, which no earlier stage writes",
                                     "04_hard_negatives reads tables/pool.csv, which no earlier stage writes"]


def test_the_source_reader_sees_reads_and_writes(tmp_path, monkeypatch):
    (tmp_path / "fake.py").write_text("def run(ctx):\n    read = ctx.table\n    a = read('pool')\n"
                                      "    b = ctx.optional_table('qrels')\n    ctx.units()\n    res.table('out', a)\n")
    monkeypatch.setattr(sys.modules[__name__], "LIB", tmp_path)
    assert source_tables("fake") == ({"pool", "qrels", "units"}, {"out"})


def test_save_refuses_an_undeclared_table(tmp_path):
    res = StageResult("04_hard_negatives", "t", tmp_path)
    res.table("distractors", pd.DataFrame({"a": [1]}))
    res.table("my_new_table", pd.DataFrame({"a": [1]}))
    with pytest.raises(contracts.ContractError, match="my_new_table"):
        res.save()


def test_undeclared_files_are_named():
    ok = ["tables/distractors.csv", "figures/04_validity_ladder.svg", "notebooks/04_hard_negatives.ipynb",
          "html/04_hard_negatives.report.html", "headlines/04_hard_negatives.json", "store/page_texts/x.npz",
          "index.html", "manifest.json"]
    bad = ["runs/ocr-bm25.run", "tables/pool.csv", "figures/07_sufficiency.svg"]
    assert contracts.undeclared_files("04_hard_negatives", ok + bad) == sorted(bad)
    assert contracts.undeclared_files("02_encode", ["runs/x.run", "vectors/a.pages/0.npy", "qrels/evidence.qrels"]) == []


def test_each_stage_module_is_named_as_its_stage():
    """03_leak_ablation's code is lookalike.stages.leak_ablation: one name for a stage, whether a reader
    starts from the notebook, the run folder or the code."""
    from lookalike.stages import STAGES

    assert {stage: stage.split("_", 1)[1] for stage in STAGES} == STAGES
    for module in STAGES.values():
        assert (Path(contracts.__file__).parent / f"{module}.py").is_file(), module
