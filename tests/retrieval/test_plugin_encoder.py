"""Plug-in encoders named by import path: resolution, the checks on what a plug-in declares and
returns, per-encoder settings, and the worked example (examples/plugin_encoder) through every stage."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest
from lookalike import params as P
from lookalike.io.cache import Cache
from lookalike.retrieval import encoders
from lookalike.retrieval import systems
from lookalike.retrieval.encoders.base import EncodeError
from lookalike.stages.base import context

from tests.conftest import REPO, make_png

EXAMPLE = "examples/plugin_encoder/hashed_ocr.py:HashedOcr"

GOOD = '''
import numpy as np
from lookalike.retrieval.encoders import Encoder, Vectors

class Colour(Encoder):
    """Mean colour of the page; queries by colour words."""
    name, provenance, kind = "{name}", "{provenance}", "{kind}"
    WORDS = {{"red": (1, 0, 0), "green": (0, 1, 0), "blue": (0, 0, 1)}}

    def __init__(self, scale=1.0, **kw):
        super().__init__(scale=float(scale), **kw)

    def encode_units(self, units, base_dir, cache=None):
        from PIL import Image
        rows = []
        for p in units["image_path"]:
            with Image.open(base_dir / p) as im:
                rows.append(np.asarray(im.convert("RGB"), np.float32).mean(axis=(0, 1)) / 255 * self.settings["scale"])
        ids = list(units["unit_id"]){reorder}
        return Vectors(self.id, self.provenance, ids, np.stack(rows).astype(np.float32), "single")

    def encode_queries(self, texts, ids):
        vecs = [np.asarray([self.WORDS.get(w, (0, 0, 0)) for w in t.split()], np.float32).sum(axis=0) for t in texts]
        return Vectors(self.id, "query-text", list(ids), np.stack(vecs), "single")
'''


def plugin(tmp_path, module="colour_plugin", name="colour", provenance="pixels", kind="single", reorder=""):
    (tmp_path / f"{module}.py").write_text(GOOD.format(name=name, provenance=provenance, kind=kind, reorder=reorder))
    return tmp_path / f"{module}.py"


@pytest.fixture
def pages(tmp_path):
    make_png(tmp_path / "r.png", (220, 20, 20))
    make_png(tmp_path / "b.png", (20, 20, 220))
    return pd.DataFrame({"unit_id": ["doc:1", "doc:2"], "image_path": ["r.png", "b.png"]})


def test_a_plugin_by_file_path_and_by_module_ranks_like_a_built_in(tmp_path, pages, monkeypatch):
    path = plugin(tmp_path)
    for spec in (f"{path}:Colour", "colour_plugin:Colour"):
        if ":" in spec and not spec.startswith("/"):
            monkeypatch.syspath_prepend(str(tmp_path))
        assert encoders.system_name(spec) == "colour" and encoders.encoder_class(spec).provenance == "pixels"
        ctx = context(tmp_path, {"encode": {"encoders": [spec], "settings": {"colour": {"scale": 2.0}}}})
        settings = ctx.encoder_settings()
        vecs, table, _ = systems.encode_units(pages, tmp_path, [spec], Cache(tmp_path / "c"), **settings)
        assert list(vecs) == ["colour"] and table["encoder"].tolist() == ["colour"]
        assert '"scale": 2.0' in table["encoder_id"].iloc[0]             # its settings are in its id (cache key)
        np.testing.assert_allclose(vecs["colour"].data[0], np.array([220, 20, 20]) / 255 * 2, atol=1e-5)
        questions = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["blue", "red"]})
        # later stages know the system by name: its spec is found again from encode.encoders
        runs = systems.build_runs(vecs, systems.encode_queries(questions, ["colour"], run_dir=tmp_path, **settings))
        top = runs["colour"].sort_values(["query_id", "score"], ascending=[True, False]).groupby("query_id").head(1)
        assert dict(zip(top["query_id"], top["unit_id"])) == {"q1": "doc:2", "q2": "doc:1"}
        assert systems.declared_provenance("colour", vecs["colour"]) == "pixels"
        vecs["colour"].save(tmp_path / "vectors", "colour")
        assert systems.base_systems(tmp_path, ["ocr-bm25", spec]) == ["colour"]
        assert systems.pixel_systems(tmp_path, ["ocr-bm25", spec]) == ["colour"]


@pytest.mark.parametrize("change, message", [
    (dict(name="ocr-bm25"), "built-in encoder's"),
    (dict(name="has space"), "set a class attribute name"),
    (dict(provenance="everything"), "provenance must be one of"),
    (dict(kind="sparse"), "kind must be one of"),
])
def test_a_plugin_that_declares_wrongly_is_refused_with_the_reason(tmp_path, change, message):
    module = f"bad_{abs(hash(str(change))) % 10**6}"
    path = plugin(tmp_path, module=module, **change)
    with pytest.raises(EncodeError, match=message):
        encoders.encoder_class(f"{path}:Colour")


def test_a_plugin_that_cannot_be_found_says_where_it_looked(tmp_path):
    with pytest.raises(EncodeError, match="cannot import no_such_package_xyz"):
        encoders.encoder_class("no_such_package_xyz.mod:Enc")
    with pytest.raises(EncodeError, match="no file"):
        encoders.encoder_class("examples/nothing_here.py:Enc")
    with pytest.raises(EncodeError, match="has no 'Nope'"):
        encoders.encoder_class(f"{EXAMPLE.split(':')[0]}:Nope")
    with pytest.raises(EncodeError, match="unknown encoder 'clipp'"):
        encoders.encoder_class("clipp")
    (tmp_path / "broken.py").write_text("import numpy as np\nraise RuntimeError('boom')\n")
    with pytest.raises(EncodeError, match="importing .*broken.py failed: RuntimeError: boom"):
        encoders.encoder_class(f"{tmp_path / 'broken.py'}:X")


def test_a_plugin_that_reorders_its_units_is_caught(tmp_path, pages):
    path = plugin(tmp_path, module="reorder_plugin", name="reorder", reorder="[::-1]")
    with pytest.raises(EncodeError, match="in another order"):
        systems.encode_units(pages, tmp_path, [f"{path}:Colour"], Cache(tmp_path / "c"))


def test_two_entries_giving_one_system_name_are_refused(tmp_path, pages):
    a = plugin(tmp_path, module="twin_a", name="twin")
    b = plugin(tmp_path, module="twin_b", name="twin")
    with pytest.raises(EncodeError, match="both give the system 'twin'"):
        systems.encode_units(pages, tmp_path, [f"{a}:Colour", f"{b}:Colour"], Cache(tmp_path / "c"))


def test_encode_settings_is_an_open_mapping_and_a_built_in_typo_is_refused(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text("encode:\n  settings:\n    hashed-ocr: {dim: 64}\n    ocr-minilm: {workerz: 2}\n")
    prm = P.load_params(run)
    assert prm["encode"]["settings"] == {"hashed-ocr": {"dim": 64}, "ocr-minilm": {"workerz": 2}}
    ctx = context(tmp_path, prm)
    with pytest.raises(EncodeError, match="'workerz' is not a setting of the ocr-minilm encoder"):
        systems.make_encoder("ocr-minilm", **ctx.encoder_settings())
    bad = tmp_path / "bad.yaml"
    bad.write_text("encode:\n  settings: [dim]\n")
    with pytest.raises(P.ParamsError, match="encode.settings' must be a mapping"):
        P.load_params(bad)


def test_the_example_plugin_hashes_pages_queries_and_captions_into_one_space(tmp_path):
    cls = encoders.encoder_class(EXAMPLE)
    enc = cls(dim=256, progress=False)
    q = enc.encode_queries(["Revenue by region, Q3 FY2024"], ["q"])
    c = enc.encode_captions(["revenue by region q3 fy2024"], ["u"])
    assert q.data.shape == (1, 256) and c.provenance == "caption-text"
    np.testing.assert_array_equal(q.data, c.data)         # lower-cased words: the same vector
    assert abs(float(np.linalg.norm(q.data)) - 1) < 1e-6
    assert encoders.has_captions(EXAMPLE) and not encoders.has_captions("ocr-minilm")


@pytest.mark.slow
def test_the_example_plugin_runs_through_every_stage_with_rerank_and_split(tmp_path, stage_kernel):
    """make report PARAMS=params/examples/plugin-encoder.yaml (its plug-in judge included), with the
    plug-in encoder also reranked (a
    /v1/rerank server) and split (a chat server) — both local stand-ins this test starts: the
    plug-in and its +rerank / +split systems are in stage 02's systems and runs, its own leak
    ablation (image / caption / both) and gate in stage 03, the validated runs and pool of stage 06,
    the metric tables and settings view of stage 07 and the mining of stage 08."""
    from tests.fake_services import Services
    from lookalike.cli import run

    with Services() as server:
        params = tmp_path / "plugin-rerank-split.yaml"
        params.write_text((REPO / "params" / "examples" / "plugin-encoder.yaml").read_text()
                          + textwrap.dedent(f"""
                          rerank:
                            systems: [hashed-ocr]
                            method: endpoint
                            url: {server.url}
                            model: toy-rerank
                          split:
                            systems: [hashed-ocr]
                            url: {server.url}
                            model: toy-chat
                          """))
        out = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None, shared_kernel=stage_kernel)
    tables = out / "tables"
    read = lambda name: pd.read_csv(tables / f"{name}.csv", keep_default_na=False)  # noqa: E731
    systems_ = set(read("systems")["system"])
    assert {"hashed-ocr", "hashed-ocr+rerank", "hashed-ocr+split"} <= systems_
    for name in ("hashed-ocr", "hashed-ocr+rerank", "hashed-ocr+split"):
        assert (out / "runs" / f"{name}.run").is_file() and (out / "runs_validated" / f"{name}.run").is_file()
    assert set(read("rerank_scores_validated")["system"]) == {"hashed-ocr+rerank"}
    assert read("query_splits")["sub_id"].nunique() >= read("query_splits")["query_id"].nunique()
    dual = read("leak_ablation_systems")
    assert set(dual["system"]) == {"hashed-ocr"}
    assert set(zip(dual["index"], dual["query_set"])) == {(i, q) for i in ("image", "caption", "both")
                                                          for q in ("blind", "caption-derived")}
    cap = dual[dual["index"] == "caption"].set_index("query_set")["recall_10"].astype(float)
    assert cap["caption-derived"] > cap["blind"]             # its caption index finds caption-derived queries
    gate = read("leak_gate").set_index("system")
    assert gate.loc["hashed-ocr", "verdict"] == "PASS" and int(gate.loc["hashed-ocr", "probe_changed"]) == 0
    assert "hashed-ocr+rerank" in set(read("pool_by_system")["system"])
    for name in ("hashed-ocr", "hashed-ocr+rerank", "hashed-ocr+split"):
        assert name in set(read("sufficiency")["system"])
    assert "hashed-ocr" in set(read("top1_negatives")["system"])
    settings = read("settings")
    ran = settings[(settings["family"] == "hashed-ocr") & (settings["status"] == "ran")]
    assert set(ran["setting"]) == {"Base", "Ctx", "B+Ctx", "Rerank", "Q-Split"}
    assert "hashed-ocr+rerank" in set(read("recall_all_by_source")["system"])
    assert read("mined_candidates")["unit_id"].size > 0
    assert "hashed-ocr" in (out / "notebooks" / "08_mined_candidates.ipynb").read_text()
    # the plug-in judge, in each stage's own kernel: by the name its module (plugins) registers, and by path
    assert set(read("judge_agreement")["second"]) == {"word-overlap"}
    assert "word-overlap" in set(read("mined_judgements")["judge"])
    store = pd.read_json(out / "labels" / "store.jsonl", lines=True)
    assert "word-overlap" in set(store["judge"])
