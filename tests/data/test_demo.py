import hashlib

import pytest
from lookalike.data import demo
from lookalike.data import schema


def _digest_dir(path):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*.png"))}


@pytest.fixture(scope="module")
def ci_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("a") / "corpus"
    return demo.generate("ci", 7, out), out


def test_generator_is_deterministic_to_the_byte(ci_corpus, tmp_path):
    first, first_dir = ci_corpus
    second = demo.generate("ci", 7, tmp_path / "corpus")
    assert _digest_dir(first_dir) == _digest_dir(tmp_path / "corpus")
    for name in ("units", "facts", "questions"):
        a, b = getattr(first, name), getattr(second, name)
        assert a.to_csv(index=False) == b.to_csv(index=False)


def test_other_seed_gives_other_values(ci_corpus, tmp_path):
    first, _ = ci_corpus
    other = demo.generate("ci", 8, tmp_path / "corpus")
    assert not first.facts["value"].equals(other.facts["value"])


def test_ci_size_and_shape(ci_corpus):
    c, _ = ci_corpus
    assert 130 <= len(c.units) <= 170
    assert c.units["unit_id"].is_unique
    assert list(c.units.columns) == schema.UNIT_COLUMNS
    assert (c.units["unit_id"] == c.units["doc_id"] + ":" + c.units["page"].astype(str)).all()
    assert c.units["page"].min() == 1
    assert set(c.questions["evidence_structure"]) == set(schema.EVIDENCE_STRUCTURES)
    assert set(c.questions["register"]) == set(schema.REGISTERS)
    assert c.questions["qualified"].any() and not c.questions["qualified"].all()
    every_unit = set(c.units["unit_id"])
    for ids in c.questions["evidence_unit_ids"]:
        assert set(ids.split(";")) <= every_unit


def test_evidence_structure_matches_page_distance(ci_corpus):
    c, _ = ci_corpus
    page = c.units.set_index("unit_id")["page"]
    doc = c.units.set_index("unit_id")["doc_id"]
    for q in c.questions.itertuples():
        ids = q.evidence_unit_ids.split(";")
        if q.evidence_structure.startswith("page-"):
            assert len(ids) == 1
        elif q.evidence_structure == "cross-doc":
            assert doc[ids[0]] != doc[ids[1]]
        else:
            gap = abs(page[ids[0]] - page[ids[1]])
            expected = {1: "doc-adjacent", 2: "doc-near", 3: "doc-near"}.get(gap, "doc-far")
            assert doc[ids[0]] == doc[ids[1]] and q.evidence_structure == expected


def test_consolidated_group_is_the_sum_of_its_subsidiaries(ci_corpus):
    c, _ = ci_corpus
    f = c.facts[(c.facts["member"] == "total") & (c.facts["revision"] == 1) & (c.facts["metric"] == "revenue")]
    f = f.drop_duplicates(["entity", "period"]).set_index(["entity", "period"])["value"]
    period = "Q3 FY2024"
    assert f[("Halvorsen Group", period)] == f[("Halvorsen Energy", period)] + f[("Halvorsen Retail", period)]


def test_restatements_repeat_a_fact_with_another_value(ci_corpus):
    c, _ = ci_corpus
    restated = c.units[c.units["revision"] == 2]
    assert len(restated) > 0
    key = ["entity", "metric", "period", "member"]
    f = c.facts[c.facts["unit_id"].isin(restated["unit_id"])]
    seg = f[(f["member"] != "total") & (f["metric"] == "revenue")]
    orig = c.facts[(c.facts["revision"] == 1) & (c.facts["metric"] == "revenue")]
    merged = seg.merge(orig, on=key, suffixes=("_r2", "_r1"))
    assert (merged["value_r2"] != merged["value_r1"]).any()


def test_filler_pages_share_no_metric(ci_corpus):
    c, _ = ci_corpus
    filler = c.units[c.units["template_id"].isin(["risk_factors", "cash_flow", "audit_opinion", "signature",
                                                   "org_chart", "cover"])]
    assert len(filler) > 0 and (filler["metric"] == "").all()


def test_caption_fields_are_partial(ci_corpus):
    c, _ = ci_corpus
    assert (c.units["caption"] == "").any() and (c.units["caption"] != "").any()
    assert (c.units["alt_text"] == "").any()


def test_unknown_size_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown demo size 'huge'"):
        demo.generate("huge", 1, tmp_path)


@pytest.mark.slow
def test_demo_size_is_about_600(tmp_path):
    c = demo.generate("demo", 7, tmp_path / "corpus")
    assert 560 <= len(c.units) <= 640
    assert len(c.questions) >= 180


def test_a_rerun_keeps_page_files_that_hold_the_same_pixels_and_rewrites_a_changed_one(tmp_path):
    from lookalike.data import demo as demo_module

    out = tmp_path / "corpus"
    first = demo_module.generate("ci", 0, out)
    files = sorted((out / "images").glob("*.png"))
    stamps = {p.name: p.stat().st_mtime_ns for p in files}
    good = files[0].read_bytes()
    files[0].write_bytes(b"not a png")                      # a page changed on disk
    again = demo_module.generate("ci", 0, out)
    assert again.units.equals(first.units)
    assert files[0].read_bytes() == good                    # rewritten from the render
    assert all(p.stat().st_mtime_ns == stamps[p.name] for p in files[1:])   # the rest were not touched
