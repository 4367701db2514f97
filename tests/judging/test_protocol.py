"""The judge protocol (judging.protocol): what a judge class must declare, one judge per name, which labels adjudicate, and what a judge may see of a unit."""

from __future__ import annotations

import pytest
from lookalike import params as P
from lookalike.judging import judges


@pytest.mark.parametrize("body, message", [
    ("class J:\n    name = 'x'\n", "set a class attribute capabilities"),
    ("from lookalike.plugin import Capabilities\nclass J:\n    name = 'a b'\n    capabilities = Capabilities('model')\n",
     "set a class attribute name"),
    ("from lookalike.plugin import Capabilities\nclass J:\n    name = 'j'\n    capabilities = Capabilities('model')\n",
     "no from_resources method"),
    ("class K:\n    pass\n", "has no 'J'"),
    ("raise RuntimeError('boom')\n", "importing .*bad.py failed: RuntimeError: boom"),
])
def test_a_plugin_judge_that_declares_wrongly_is_refused_with_the_reason(tmp_path, body, message):
    (tmp_path / "bad.py").write_text(body)
    spec = f"{tmp_path / 'bad.py'}:J"
    with pytest.raises(judges.JudgeError, match=message):
        judges.resolve_name(spec)
    with pytest.raises(P.ParamsError, match=f"key 'validate.judge' names a plug-in judge that does not load: .*{message}"):
        P.check({"validate": {"judge": spec}})


def test_a_second_judge_under_a_taken_name_is_refused(tmp_path):
    (tmp_path / "clash.py").write_text("from lookalike.plugin import Capabilities\nclass J:\n    name = 'human'\n"
                                       "    capabilities = Capabilities('model')\n    @classmethod\n"
                                       "    def from_resources(cls, **_):\n        return cls()\n"
                                       "    def judge(self, q, u):\n        pass\n")
    with pytest.raises(judges.JudgeError, match="name 'human' is already another judge's"):
        judges.resolve_name(f"{tmp_path / 'clash.py'}:J")


def test_only_peoples_labels_and_the_answer_key_adjudicate():
    from lookalike.judging.protocol import Capabilities

    assert Capabilities(source="human").adjudicates and Capabilities(source="reference").adjudicates
    assert not Capabilities(source="model", reads_image=True).adjudicates


def test_a_judge_sees_ids_image_paths_and_text_never_file_names_or_captions(tmp_path):
    import pandas as pd

    from lookalike.judging.protocol import unit_view, unit_viewer

    units = pd.DataFrame({"unit_id": ["d:1", "d:2"], "image_path": ["pages/revenue_2023.png", "pages/b.png"],
                          "filename": ["revenue_2023.png", "b.png"], "caption": ["Revenue 2023", "x"]})
    one = unit_view(units, ["d:1"], {"d:1": "Revenue $12M"})
    assert one == {"unit_id": "d:1", "unit_ids": ["d:1"], "text": "Revenue $12M", "content_types": [""],
                   "image_paths": ["pages/revenue_2023.png"], "image_path": "pages/revenue_2023.png"}
    both = unit_viewer(units, {"d:1": "a", "d:2": "b"}, tmp_path)(["d:2", "d:1"])
    # an evidence set: ids and pages in the order asked, texts joined, paths resolved; no single image_path
    assert both["unit_id"] == "d:2;d:1" and both["text"] == "b\na" and "image_path" not in both
    assert both["image_paths"] == [str(tmp_path / "pages/b.png"), str(tmp_path / "pages/revenue_2023.png")]
    assert "caption" not in both and "filename" not in both
