"""The command line's front door (cli/__init__.py): each command reaches its own module with the rest of
the line, --version names the installed version, a command nobody knows is refused, and `example`
says what it wrote and never overwrites a user's file without --force."""

from __future__ import annotations

import importlib

import pytest

from lookalike import cli


@pytest.mark.parametrize("command, module", [("eval", "eval"), ("leak-check", "leak_check"), ("check", "check"),
                                             ("audit", "audit"), ("labels", "labels")])
def test_each_command_hands_the_rest_of_the_line_to_its_module(command, module, monkeypatch):
    seen = []
    monkeypatch.setattr(importlib.import_module(f"lookalike.cli.{module}"), "main", lambda argv: seen.append(argv) or 7)
    assert cli.main([command, "a", "--b", "c"]) == 7
    assert seen == [["a", "--b", "c"]]


def test_run_passes_its_params_output_root_and_stages(monkeypatch):
    seen = []
    monkeypatch.setattr(importlib.import_module("lookalike.cli.run"), "main", lambda *a: seen.append(a) or 0)
    assert cli.main(["run", "params/ci.yaml", "--out", "/tmp/x", "--stage", "01_stratify_corpus", "--stage", "02_encode"]) == 0
    assert seen == [("params/ci.yaml", "/tmp/x", ["01_stratify_corpus", "02_encode"])]


def test_version_and_an_unknown_command(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("lookalike ")
    with pytest.raises(SystemExit) as done:
        cli.main(["frobnicate"])
    assert done.value.code == 2 and "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_example_refuses_to_overwrite_a_users_file_and_says_what_force_replaced(tmp_path, capsys):
    folder = tmp_path / "photos"
    assert cli.main(["example", "photos", str(folder)]) == 0
    assert "files written under" in capsys.readouterr().out
    mine = next(p for p in sorted(folder.rglob("*.jsonl")))
    mine.write_text("my own questions\n")
    assert cli.main(["example", "photos", str(folder)]) == 2
    assert "lookalike example:" in capsys.readouterr().err and mine.read_text() == "my own questions\n"
    assert cli.main(["example", "photos", str(folder), "--force"]) == 0
    assert "replacing files already there" in capsys.readouterr().out
    assert mine.read_text() != "my own questions\n"
    assert cli.main(["example", "photos", str(tmp_path / "x"), "--seed", "-1"]) == 2
