"""A judge plugs in the way an encoder does: by import path ("path/to/file.py:Class",
"package.module:Class") or by a name it registered in a module the run's plugins key imports — and
the parameter check allows it where its kind of labels is allowed (the worked example:
examples/plugin_judge/word_overlap.py)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from lookalike import params as P
from lookalike.cli import check
from lookalike.judging import judges

REPO = Path(__file__).resolve().parents[2]
FILE = "examples/plugin_judge/word_overlap.py"
EXAMPLE = f"{FILE}:WordOverlapJudge"


def _forget_plugin_modules() -> None:
    for key in [k for k in sys.modules if k.startswith("lookalike_plugin_")]:
        del sys.modules[key]


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Each test starts from the built-in judges, with no plug-in module imported yet; afterwards the
    registry is as it was and no plug-in module stays imported (a later import registers again)."""
    monkeypatch.setattr(judges.REGISTRY, "_specs", {n: s for n, s in judges.REGISTRY._specs.items()
                                               if n in ("reference", "answer-string", "human", "openai-compatible")})
    _forget_plugin_modules()
    monkeypatch.chdir(REPO)
    yield
    _forget_plugin_modules()


def test_the_example_judge_by_path_enters_under_its_name_and_labels_by_its_rule():
    assert judges.resolve_name(EXAMPLE) == "word-overlap" and judges.resolve_name(EXAMPLE) == "word-overlap"
    judge = judges.make_judge(EXAMPLE)
    assert judge.name == "word-overlap" and judges.describe("word-overlap").startswith("word-overlap (model labels)")
    q = {"text": "What was the revenue of Acme in 2021?", "answer": "4,120"}
    assert judge.judge(q, {"text": "Acme revenue 2021: 4,120"}).label == "sufficient"
    assert judge.judge(q, {"text": "Acme revenue 2021 rose"}).label == "supporting"
    assert judge.judge(q, {"text": "a cat"}).label == "irrelevant"
    assert judge.judge(q, {"text": " "}).label == judges.ABSTAIN
    assert judge.judge({"text": q["text"], "answer": ""}, {"text": "x"}).label == judges.ABSTAIN


@pytest.mark.parametrize("key", ["validate.judge", "validate.compare_judge", "labels.model_judge", "mining.judge",
                                 "mining.compare_judge"])
def test_every_judge_key_takes_the_plugin_by_path_and_by_its_registered_name(key):
    section, name = key.split(".")
    assert P.check({section: {name: EXAMPLE}})[section][name] == EXAMPLE
    assert P.check({"plugins": [FILE], section: {name: "word-overlap"}})[section][name] == "word-overlap"


def test_a_registered_name_needs_its_module_in_plugins():
    with pytest.raises(P.ParamsError, match="key 'validate.judge' must be one of auto, reference.*got 'word-overlap'"):
        P.check({"validate": {"judge": "word-overlap"}})
    with pytest.raises(P.ParamsError, match=r"key 'plugins' entry 1 \('examples/nope.py'\): no file examples/nope.py"):
        P.check({"plugins": ["examples/nope.py"]})


def test_a_plugin_judge_whose_labels_are_peoples_is_refused_as_the_model_judge(tmp_path):
    (tmp_path / "people.py").write_text(textwrap.dedent("""
        from lookalike.plugin import Capabilities, Judgement

        class People:
            name = "our-people"
            capabilities = Capabilities("human", reads_image=True)

            @classmethod
            def from_resources(cls, **_):
                return cls()

            def judge(self, question, unit):
                return Judgement("irrelevant", "", self.name)
        """))
    spec = f"{tmp_path / 'people.py'}:People"
    assert P.check({"validate": {"judge": spec}})
    with pytest.raises(P.ParamsError, match="key 'labels.model_judge' names the plug-in judge 'our-people', which is "
                                            "not one of the kinds allowed here"):
        P.check({"labels": {"model_judge": spec}})


def test_lookalike_check_accepts_a_run_naming_plugin_judges_and_plans_with_their_names(tmp_path, capsys):
    params = tmp_path / "judges.yaml"
    # without plugins the name is unknown (checked first: in one process a module, once imported, stays)
    params.write_text("run: plugin-judges\nlabels:\n  model_judge: word-overlap\n")
    assert check.main([str(params)]) == check.BAD_PARAMS
    assert "key 'labels.model_judge' must be one of answer-string, openai-compatible" in capsys.readouterr().out
    params.write_text(textwrap.dedent(f"""
        run: plugin-judges
        plugins: [{FILE}]
        validate:
          compare_judge: word-overlap
        labels:
          model_judge: "{EXAMPLE}"
        mining:
          compare_judge: word-overlap
        """))
    assert check.main([str(params)]) == check.OK
    out = capsys.readouterr().out
    assert "pre-labels with word-overlap" in out and "the run can proceed" in out


def test_the_same_plugin_module_imported_again_takes_its_name_back():
    """A plug-in file read anew (its module forgotten, or a notebook re-running its import) registers the
    same class again instead of being refused as another judge of that name."""
    assert P.check({"plugins": [FILE], "validate": {"judge": "word-overlap"}})
    first = judges.REGISTRY["word-overlap"].make
    _forget_plugin_modules()
    assert P.check({"plugins": [FILE], "validate": {"judge": "word-overlap"}})
    assert judges.REGISTRY["word-overlap"].make is not first
    assert judges.resolve_name(EXAMPLE) == "word-overlap"
