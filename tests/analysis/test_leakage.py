"""Leak ablation: matched query sets, the provenance guard, the gate and its fault injection, pooling."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from lookalike.analysis import leakage
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval.encoders.base import Vectors

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ci_corpus(tmp_path_factory):
    from lookalike.data import demo

    out = tmp_path_factory.mktemp("leak")
    return demo.generate("ci", 7, out / "corpus"), out


@pytest.fixture(scope="module")
def ci_units(ci_corpus):
    return ci_corpus[0].units, ci_corpus[1]


def test_paraphrase_is_deterministic_and_rewords():
    text = "Halvorsen Energy revenue by segment, Q2 FY2024"
    assert leakage.paraphrase(text) == leakage.paraphrase(text) == "Q2 FY2024, Halvorsen Energy sales by segment"
    assert leakage.paraphrase("bar chart with Grid $1,038M, Q2 FY2024") == "Q2 FY2024, bar graph with Grid $1,038M"


def test_blind_queries_come_from_the_page_and_never_from_the_caption(ci_corpus):
    c, _ = ci_corpus
    q = leakage.build_query_sets(c.units, seed=7, visible=c.visible, facts=c.facts)
    blind, derived = q[q["query_set"] == "blind"], q[q["query_set"] == "caption-derived"]
    assert len(blind) == len(derived) > 20
    assert list(blind["unit_id"]) == list(derived["unit_id"])
    assert list(blind["register"]) == list(derived["register"])
    # the blind path is never handed a caption field: garbling every caption changes no blind query
    garbled = c.units.assign(filename="zzz.png",
                             alt_text=c.units["alt_text"].where(c.units["alt_text"] == "", "alt " + c.units["unit_id"]),
                             caption=c.units["caption"].where(c.units["caption"] == "", "Caption " + c.units["unit_id"]))
    again = leakage.build_query_sets(garbled, seed=7, visible=c.visible, facts=c.facts)
    again = again[again["query_set"] == "blind"].set_index("unit_id")["text"]
    assert set(blind["unit_id"]) <= set(again.index)
    assert list(again[blind["unit_id"]]) == list(blind["text"])
    # each blind query prints something the page shows: a colour word and a printed value or line
    colours = dict(zip(c.visible["unit_id"], c.visible["colour"]))
    assert all(colours[u] in t for u, t in zip(blind["unit_id"], blind["text"]))
    # their words come from the page, the caption-derived ones from the caption
    overlap = leakage.caption_overlap(q, c.units).set_index("query_set")
    assert overlap.loc["caption-derived", "overlap_lo"] > overlap.loc["blind", "overlap_hi"]
    assert overlap.loc["caption-derived", "overlap"] > 2 * overlap.loc["blind", "overlap"]
    source = c.units.set_index("unit_id")["caption"]
    targets = source[blind["unit_id"]].str.lower()
    assert targets[targets != ""].is_unique


def test_without_a_visible_record_blind_queries_fall_back_to_metadata(ci_units):
    units, _ = ci_units
    q = leakage.build_query_sets(units, seed=7)
    blind = q[q["query_set"] == "blind"]
    assert len(blind) > 20 and all("entity" in x for x in blind["qualifiers"])


def test_shuffled_metadata_moves_every_units_fields(ci_units):
    units, _ = ci_units
    moved = leakage.shuffled_metadata(units, seed=3)
    assert list(moved["unit_id"]) == list(units["unit_id"]) and list(moved["image_path"]) == list(units["image_path"])
    assert sorted(moved["filename"]) == sorted(units["filename"])
    assert (moved["filename"] != units["filename"]).mean() > 0.95


def test_metadata_probe_sees_a_path_that_reads_the_file_name(ci_units):
    units, _ = ci_units
    pixels = lambda us: Vectors("p", "pixels", list(us["unit_id"]), [f"page {u}" for u in us["unit_id"]], "text")  # noqa: E731
    leaky = lambda us: Vectors("p", "pixels", list(us["unit_id"]),  # noqa: E731
                               [f"page {u} {f}" for u, f in zip(us["unit_id"], us["filename"])], "text")
    probe = leakage.metadata_probe({"image": pixels, "ocr-bm25": leaky}, units, seed=1)
    assert probe["image"] == (0, len(units))
    assert probe["ocr-bm25"][0] > 0.9 * len(units) and probe["pixels-rrf"] == probe["ocr-bm25"]
    per_query = pd.DataFrame({"index": "ocr-bm25", "unit_id": ["a", "a"], "query_set": ["blind", "caption-derived"],
                              "recall_10": [1.0, 1.0]})
    assert leakage.paired_gate(per_query, "ocr-bm25", probe=probe["ocr-bm25"]).verdict == "LEAK"      # no recall gain at all
    assert leakage.paired_gate(per_query, "ocr-bm25", probe=(0, 10)).verdict == "PASS"


def test_clean_indexes_refuse_caption_vectors_in_the_image_path():
    caption = Vectors("caption-minilm", "caption-text", ["a", "b"], np.eye(2, dtype=np.float32))
    pixels = Vectors("ocr-minilm", "pixels", ["a", "b"], np.eye(2, dtype=np.float32))
    with pytest.raises(retrieve.ProvenanceError):
        leakage.build_indexes(caption, caption, injected=False)
    clean = leakage.build_indexes(pixels, caption)
    assert not clean.injected and not clean.image.allow_foreign_provenance
    injected = leakage.build_indexes(pixels, caption, injected=True)
    assert injected.injected and injected.image.allow_foreign_provenance     # bypass is explicit and recorded


def _leak_check(*extra):
    return subprocess.run([sys.executable, "-m", "lookalike", "leak-check", str(REPO / "params" / "ci.yaml"), *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=900)


def test_gate_passes_on_the_ci_configuration():
    res = _leak_check()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS" in res.stdout and "image: caption-derived − blind recall@10" in res.stdout and "decision rule, per pixel system: LEAK when" in res.stdout and "ocr-bm25: caption-derived" in res.stdout
    # the image index's PASS states the power measured in the same run, on a planted caption-index leak
    assert "a caption-index leak planted in this run (the image index reading the caption fields) moved" in res.stdout
    # one difference, one interval, wherever it is printed: the ci corpus is smaller than leak.gate_units, so
    # leak-check gates the same units as stage 03 did in the stored ci run, with the same seed and resamples
    import json
    stored = json.loads((REPO / "outputs" / "ci" / "notebooks" / "03_leak_ablation.ipynb").read_text(encoding="utf-8"))
    printed = "".join("".join(o.get("text", "")) for c in stored["cells"] for o in c.get("outputs", []))
    line = next(x for x in printed.splitlines() if x.startswith("image: caption-derived"))
    assert line.split(": PASS")[0] in res.stdout, (line, res.stdout)


def test_gate_fails_when_a_caption_leak_is_injected():
    res = _leak_check("--inject-caption-leak")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL" in res.stdout and "caption-index leak injected" in res.stdout


def test_gate_fails_when_the_file_name_is_appended():
    """A partial leak too small to move recall (the old gate passed it 19 times in 20): the probe sees it."""
    res = _leak_check("--inject-leak", "filename")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "changes when the caption fields are shuffled" in res.stdout


def test_gate_decision():
    table = pd.DataFrame({"index": ["image", "image"], "query_set": ["blind", "caption-derived"],
                          "recall_10": [0.60, 0.66]})
    assert leakage.gate(table, 0.05)[0] is False
    assert leakage.gate(table, 0.10)[0] is True


def _runs():
    a = pd.DataFrame({"query_id": ["q1"] * 3 + ["q2"] * 3, "unit_id": ["u1", "u2", "u3", "u4", "u5", "u1"],
                      "score": [3.0, 2.0, 1.0, 3.0, 2.0, 1.0]})
    b = pd.DataFrame({"query_id": ["q1"] * 2 + ["q2"] * 2, "unit_id": ["u2", "u9", "u5", "u8"], "score": [2.0, 1.0, 2.0, 1.0]})
    return {"a": a, "b": b}


def test_pool_is_deduplicated_shuffled_and_blind():
    queries = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["first", "second"], "unit_id": ["u1", "u5"]})
    sheet = leakage.sheet(_runs(), queries, k=2, seed=1)
    assert len(sheet) == len(set(zip(sheet["query_id"], sheet["unit_id"]))) == 6
    assert list(sheet.columns) == ["item", "query_id", "text", "unit_id"]
    view = leakage.judge_view(sheet)
    assert list(view.columns) == ["item", "query", "label"]            # no unit id, system, rank or caption
    judged = sheet.iloc[:4][["query_id", "unit_id"]]
    again = leakage.sheet(_runs(), queries, k=2, seed=1, judged=judged)
    assert len(again) == 2 and not set(zip(again["query_id"], again["unit_id"])) & set(zip(judged["query_id"], judged["unit_id"]))


def test_import_judgements_round_trip_and_errors(tmp_path):
    queries = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["first", "second"], "unit_id": ["u1", "u5"]})
    sheet = leakage.sheet(_runs(), queries, k=2, seed=1)
    filled = leakage.judge_view(sheet)
    filled.loc[0, "label"] = "sufficient"
    filled.loc[1, "label"] = "irrelevant"
    filled.to_csv(tmp_path / "filled.csv", index=False)
    got = leakage.import_judgements(tmp_path / "filled.csv", sheet)
    assert list(got["label"]) == ["sufficient", "irrelevant"] and list(got["grade"]) == [2, 0]
    assert set(got["judge"]) == {"human"}
    assert (got["unit_id"].iloc[0], got["query_id"].iloc[0]) == (sheet["unit_id"].iloc[0], sheet["query_id"].iloc[0])
    filled.loc[2, "label"] = "3"
    filled.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="bad.csv: row 3: label '3' is not one of sufficient, supporting, irrelevant"):
        leakage.import_judgements(tmp_path / "bad.csv", sheet)
    # a sheet from before the labels (grades 2 / 1 / 0) reads through the same grades
    old = leakage.judge_view(sheet).rename(columns={"label": "grade"})
    old.loc[0, "grade"], old.loc[1, "grade"] = "1", "2"
    old.to_csv(tmp_path / "old.csv", index=False)
    assert list(leakage.import_judgements(tmp_path / "old.csv", sheet)["label"]) == ["supporting", "sufficient"]


def test_judged_at_k_shows_unfair_pools():
    judgements = pd.DataFrame({"query_id": ["q1", "q1"], "unit_id": ["u1", "u2"], "label": ["sufficient", "irrelevant"]})
    table = leakage.judged_at_k(_runs(), judgements, k=2).set_index("system")["judged_2"]
    assert table["a"] == pytest.approx(0.5)       # q1: u1,u2 judged (1.0); q2: none (0.0)
    assert table["b"] == pytest.approx(0.25)


def test_reference_labels(ci_units):
    units, _ = ci_units
    q = leakage.build_query_sets(units, seed=7).head(2)
    target = q["unit_id"].iloc[0]
    same = units[(units["template_id"] == units.set_index("unit_id").loc[target, "template_id"])
                 & (units["metric"] == units.set_index("unit_id").loc[target, "metric"])
                 & (units["entity"] == units.set_index("unit_id").loc[target, "entity"])
                 & (units["unit_id"] != target)]["unit_id"].iloc[0]
    sheet = pd.DataFrame({"item": ["j0", "j1"], "query_id": [q["query_id"].iloc[0]] * 2, "unit_id": [target, same]})
    got = leakage.reference_labels(sheet, q, units)
    near = "supporting" if units.set_index("unit_id").loc[target, "metric"] else "irrelevant"
    assert list(got["label"]) == ["sufficient", near]
    assert list(got["grade"]) == [2, 1 if near == "supporting" else 0]
    assert set(got["judge"]) == {"reference"}


def test_judging_sheet_html_hides_ids_and_escapes(tmp_path, ci_units):
    units, base = ci_units
    sheet = pd.DataFrame({"item": ["j0"], "query_id": ["q"], "text": ["<script>x</script> revenue"],
                          "unit_id": [units["unit_id"].iloc[1]]})
    page = leakage.judging_sheet_html(sheet, units, tmp_path / "sheet.html", base).read_text()
    assert "&lt;script&gt;x" in page and "<script>x" not in page
    assert units["unit_id"].iloc[1] not in page and Path(units["image_path"].iloc[1]).stem not in page
    assert len(list((tmp_path / "sheet_images").iterdir())) == 1


def test_users_own_blind_queries_get_caption_derived_twins(tmp_path, ci_units):
    units, _ = ci_units
    with_caption = units[units["caption"] != ""].head(3)
    no_caption = units[(units["caption"] == "") & (units["alt_text"] == "")].head(1)
    rows = [{"query_id": f"u{i}", "unit_id": uid, "text": f"page {i} as I saw it", "register": "question"}
            for i, uid in enumerate(list(with_caption["unit_id"]) + list(no_caption["unit_id"]))]
    pd.DataFrame(rows).to_csv(tmp_path / "blind.csv", index=False)
    q, dropped = leakage.read_blind_queries(tmp_path / "blind.csv", units)
    assert list(dropped["unit_id"]) == list(no_caption["unit_id"]) and list(dropped["row"]) == [5]
    assert "no caption or alt text" in dropped["problem"].iloc[0]
    assert list(q["query_set"].value_counts().sort_index()) == [3, 3]         # the caption-less unit is dropped
    assert set(q["register"]) == {"question"}
    assert set(q[q["query_set"] == "blind"]["text"]) == {"page 0 as I saw it", "page 1 as I saw it", "page 2 as I saw it"}
    pd.DataFrame([{"query_id": "x", "unit_id": "nope:1", "text": "t"}]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="bad.csv: row 1 \\(query 'x'\\): unknown unit_id 'nope:1'"):
        leakage.read_blind_queries(tmp_path / "bad.csv", units)


def test_leak_check_exits_3_when_no_pairs_can_be_built(monkeypatch, capsys):
    """A corpus without captions (and no blind query file) yields no pairs: the gate did not run —
    exit 3 and 'NOT EVALUATED', never 0 (a pass) or 1 (a leak)."""
    from lookalike.cli import leak_check
    from lookalike.stages import leak_ablation, stratify_corpus

    nan = float("nan")
    empty = pd.DataFrame({"index": ["image", "image"], "query_set": ["blind", "caption-derived"], "n": [0, 0],
                          "recall_10": [nan, nan], "recall_10_lo": [nan, nan], "recall_10_hi": [nan, nan]})
    from lookalike.data.schema import Corpus

    monkeypatch.setattr(stratify_corpus, "load_corpus", lambda ctx: Corpus(units=pd.DataFrame({"unit_id": [], "doc_id": []})))
    no_pairs = pd.DataFrame(columns=["index", "query_id", "unit_id", "query_set", "recall_10"])
    fake = type("A", (), {"pixel_pq": no_pairs, "probe": {}, "not_evaluated": ""})()
    monkeypatch.setattr(leak_ablation, "ablation", lambda *a, **k: (fake, None, None, empty, no_pairs))
    assert leak_check.main([str(REPO / "params" / "ci.yaml")]) == 3
    assert "NOT EVALUATED" in capsys.readouterr().out


def test_gate_fails_on_a_file_name_reaching_the_image_path_only_when_it_moves_the_paired_difference():
    """The paired rule on synthetic per-query values: a material, significant difference is a LEAK;
    the same mean difference on a handful of units is not significant and passes; no pairs is
    NOT EVALUATED — never a leak."""
    units = [f"u{i}" for i in range(60)]
    rows = [{"index": "image", "unit_id": u, "query_set": qs, "query_id": f"{u}-{qs}",
             "recall_10": float(qs == "caption-derived" or i % 3 == 0)} for i, u in enumerate(units)
            for qs in ("blind", "caption-derived")]
    per_query = pd.DataFrame(rows)
    leak = leakage.paired_gate(per_query, "image", 0.05, n_boot=500, seed=1)
    assert leak.verdict == "LEAK" and leak.lo > 0 and leak.n_pairs == 60
    few = leakage.paired_gate(per_query[per_query["unit_id"].isin(units[:2])], "image", 0.05, n_boot=500, seed=1)
    # two units and no probe: not a leak, and not a pass either — the test could not see a total leak
    assert few.verdict == "NOT EVALUATED" and few.lo <= 0 and few.underpowered
    none = leakage.paired_gate(per_query.head(0), "image", 0.05)
    assert none.verdict == "NOT EVALUATED" and "NOT EVALUATED" in none.sentence()


def test_a_pass_of_the_retrieval_test_states_its_power():
    """On photos the classic leak moved the image index +0.05 [0.00, +0.125] over 40 units: the gate said
    PASS on retrieval with no word that it could only have caught a leak of about 0.09 or more."""
    from lookalike.analysis.leak_gate import GateResult

    g = GateResult("team-run", 40, 0.50, 0.55, 0.05, 0.0, 0.125, 0.05, "PASS")
    assert g.detectable == pytest.approx(max(2.8016 * 0.125 / 3.92, 0.05 + 0.8416 * 0.125 / 3.92), rel=1e-3)
    said = g.sentence()
    assert "would catch a leak of about 0.09 recall@10 or more with 80% power over 40 units" in said
    assert "this system had no metadata probe" in said
    probed = GateResult("image", 40, 0.50, 0.55, 0.05, 0.0, 0.125, 0.05, "PASS", probe_changed=0, probe_n=40)
    assert "no metadata probe" not in probed.sentence() and "about 0.09" in probed.sentence()
    leak = GateResult("image", 40, 0.2, 0.6, 0.4, 0.3, 0.5, 0.05, "LEAK")
    assert "80% power" not in leak.sentence()                  # a LEAK needs no power statement
    assert GateResult("image", 0, *[float("nan")] * 5, 0.05, "NOT EVALUATED").power_words() == ""


def test_a_retrieval_test_that_cannot_see_a_total_leak_says_underpowered():
    """Blind recall 0.95 leaves 0.05 of room; a test that needs about 0.09 to catch a leak cannot see
    even a total one: with a probe the sentence says the probe is the evidence; without one (a run
    file) the verdict is NOT EVALUATED, never a bare PASS."""
    from lookalike.analysis.leak_gate import GateResult

    probed = GateResult("image", 40, 0.95, 0.97, 0.02, -0.02, 0.105, 0.05, "PASS", probe_changed=0, probe_n=40)
    assert probed.underpowered and "underpowered on this corpus" in probed.sentence()
    assert "the probe is the evidence" in probed.sentence()
    roomy = GateResult("image", 40, 0.50, 0.52, 0.02, -0.02, 0.105, 0.05, "PASS", probe_changed=0, probe_n=40)
    assert not roomy.underpowered and "underpowered" not in roomy.sentence()
    per_query = pd.DataFrame({"index": "team-run", "unit_id": [f"u{i}" for i in range(10)] * 2,
                              "query_set": ["blind"] * 10 + ["caption-derived"] * 10,
                              "recall_10": [1.0] * 9 + [0.0] + [1.0] * 10})
    g = leakage.paired_gate(per_query, "team-run", 0.05, n_boot=500, seed=1)
    assert g.verdict == "NOT EVALUATED" and "nothing here would catch a leak" in g.sentence()
    assert leakage.overall([g]) == "NOT EVALUATED"


def _run(rankings: dict) -> pd.DataFrame:
    return pd.DataFrame([(q, u, float(len(us) - i)) for q, us in rankings.items() for i, u in enumerate(us)],
                        columns=["query_id", "unit_id", "score"])


def test_a_run_file_is_probed_by_its_run_on_the_shuffled_corpus():
    same = _run({"q1": ["u1", "u2", "u3"], "q2": ["u3", "u1"]})
    g, notes = leakage.run_probe("team", same, same.copy())
    assert g.verdict == "PASS" and (g.probe_changed, g.probe_n) == (0, 2) and notes == []
    assert "metadata probe: 0 of 2 questions' top-10 rankings changed" in g.sentence()
    moved = _run({"q1": ["u2", "u1", "u3"], "q2": ["u3", "u1"]})
    g, _ = leakage.run_probe("team", same, moved)
    assert g.verdict == "LEAK" and g.probe_changed == 1
    g, notes = leakage.run_probe("team", same, _run({"q1": ["u1", "u2", "u3"]}))
    assert g.verdict == "PASS" and g.probe_n == 1 and "lacks 1 of the 2 questions" in notes[0]
    g, _ = leakage.run_probe("team", same, _run({"q9": ["u1"]}))
    assert g.verdict == "NOT EVALUATED"


def test_shuffled_corpus_then_the_gate_says_leak_for_a_run_that_reads_captions(tmp_path):
    """leak-check --shuffled-corpus writes the photo corpus with captions moved among units; a scripted
    retriever that ranks by caption words gives another run on it, and stage 03's probe says LEAK; one
    that reads only the image file gives the same run, and it says PASS. A folder with files is refused."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shapes"))
    from shape_corpora import SHAPES

    from lookalike import params as P
    from lookalike import stages
    from lookalike.cli import leak_check
    from lookalike.judging.judges import content_words
    from lookalike.stages import leak_ablation

    params = SHAPES["photos-captions"](tmp_path / "corpus", seed=11)
    out = tmp_path / "shuffled"
    assert leak_check.main([str(params), "--shuffled-corpus", str(out)]) == 0
    shuffled = pd.read_csv(out / "manifest.csv", keep_default_na=False)
    assert (out / "README.md").is_file() and all(Path(p).is_file() for p in shuffled["image_path"])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep me")
    assert leak_check.main([str(params), "--shuffled-corpus", str(tmp_path / "full")]) == 2
    assert (tmp_path / "full" / "mine.txt").read_text() == "keep me"

    prm = P.load_params(params)
    ctx = stages.context(tmp_path / "run", prm)
    from lookalike.stages import stratify_corpus
    units = stratify_corpus.load_corpus(ctx).units
    original = units[["unit_id", "caption"]]
    questions = {f"q{i}": w for i, w in enumerate(sorted({w for c in units["caption"] for w in content_words(c)})[:12])}

    def by_caption(frame):
        caption = dict(zip(frame["unit_id"], frame["caption"]))
        return _run({q: sorted(frame["unit_id"], key=lambda u, w=w: (w not in content_words(caption[u]), u))[:10]
                     for q, w in questions.items()})

    def by_pixels(frame):
        import hashlib
        return _run({q: sorted(frame["unit_id"], key=lambda u, w=w: hashlib.sha256(
            (w + Path(frame.set_index("unit_id").loc[u, "image_path"]).read_bytes().hex()[:64]).encode()).hexdigest())[:10]
            for q, w in questions.items()})

    from lookalike.data.schema import resolve_image
    original_paths = units.assign(image_path=[str(resolve_image(str(p), ctx.run_dir).resolve()) for p in units["image_path"]])
    (ctx.run_dir / "runs").mkdir(parents=True, exist_ok=True)
    from lookalike.eval import ranking
    for name, ranker, frame_a, frame_b in (("captions", by_caption, original, shuffled),
                                           ("pixels", by_pixels, original_paths, shuffled)):
        ranking.write_run(ranker(frame_a), ctx.run_dir / "runs" / f"{name}.run", tag=name)
        ranking.write_run(ranker(frame_b), tmp_path / f"{name}.shuffled.run", tag=name)
    prm["retrieve"]["external_runs"] = [f"captions={tmp_path / 'x.run'}", f"pixels={tmp_path / 'y.run'}"]
    prm["leak"]["shuffled_runs"] = [f"captions={tmp_path / 'captions.shuffled.run'}",
                                    f"pixels={tmp_path / 'pixels.shuffled.run'}"]
    cfg = stages.context(tmp_path / "run", prm).config
    results, notes = leak_ablation.shuffled_run_probes(cfg, units, ctx.run_dir)
    verdicts = {g.index: g.verdict for g in results}
    assert verdicts == {"captions": "LEAK", "pixels": "PASS"}, [g.sentence() for g in results]
    prm["leak"]["shuffled_runs"] = ["nobody=x.run"]
    with pytest.raises(ValueError, match="'nobody' is not one of your runs"):
        leak_ablation.shuffled_run_probes(stages.context(tmp_path / "run", prm).config, units, ctx.run_dir)


def test_the_power_measured_on_a_planted_leak_decides_underpowered():
    """Photos: the classic leak planted in the image index moved the difference only +0.05 [0.00, +0.125]
    and the retrieval test did not call it; the PASS must say the retrieval test is underpowered and
    the probe is the evidence — even where the analytic rule alone would not have said so."""
    from lookalike.analysis.leak_gate import GateResult

    base = dict(index="image", n_pairs=40, blind=0.50, derived=0.52, difference=0.02, lo=-0.02, hi=0.105,
                threshold=0.05, verdict="PASS", probe_changed=0, probe_n=40)
    missed = GateResult(**base, planted=(0.05, 0.0, 0.125, False))
    assert missed.underpowered and not GateResult(**base).underpowered
    said = missed.sentence()
    assert "underpowered on this corpus" in said and "did not catch it" in said and "the probe is the evidence" in said
    assert "+0.050 [+0.000, +0.125]" in said
    caught = GateResult(**base, planted=(0.40, 0.30, 0.50, True))
    assert not caught.underpowered and "caught it" in caught.sentence() and "underpowered" not in caught.sentence()
    per_query = pd.DataFrame({"index": "image", "unit_id": [f"u{i}" for i in range(30)] * 2,
                              "query_set": ["blind"] * 30 + ["caption-derived"] * 30,
                              "recall_10": [0.0] * 30 + [1.0] * 30})
    assert leakage.planted_power(per_query, 0.05, n_boot=200)[3] is True
    assert leakage.planted_power(per_query.head(0)) is None


def test_no_spread_in_the_differences_is_underpowered_not_a_stated_power():
    """Photos under OCR + BM25: no unit's text, every unit scores alike on both sets, the interval is
    [0, 0]; that once read 'would catch a leak of about 0.05 or more'."""
    from lookalike.analysis.leak_gate import GateResult

    flat = GateResult("ocr-bm25", 40, 0.25, 0.25, 0.0, 0.0, 0.0, 0.05, "PASS", probe_changed=0, probe_n=40)
    assert flat.underpowered and "finds no spread" in flat.sentence() and "0.05 recall@10 or more" not in flat.sentence()
