"""Hard negatives: same template, exactly one axis apart; restatements; clustering fallback; random."""

import numpy as np
import pandas as pd
import pytest
from lookalike.analysis import negatives
from lookalike.retrieval.encoders.appearance import appearance_vector


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from lookalike.data import demo
    from PIL import Image

    out = tmp_path_factory.mktemp("neg")
    c = demo.generate("ci", 7, out / "corpus")
    vecs = np.stack([appearance_vector(Image.open(out / p)) for p in c.units["image_path"]])
    return c, vecs


AXIS_FIELDS = ("entity", "metric", "period", "revision")


def test_every_distractor_shares_the_template_and_differs_on_exactly_its_axis(corpus):
    c, vecs = corpus
    golds = c.units[c.units["template_id"].isin(["segment_bar", "trend_line", "kpi_table", "region_table"])]["unit_id"]
    hard, sizes = negatives.hard_negatives(c.units, vecs, golds, k=3)
    assert len(hard) > 100
    meta = c.units.set_index("unit_id")
    for rec in hard.itertuples():
        g, d = meta.loc[rec.gold_unit_id], meta.loc[rec.unit_id]
        assert g["template_id"] == d["template_id"]
        differs = [f for f in AXIS_FIELDS if str(g[f]) != str(d[f])]
        assert differs == [rec.axis], (rec.gold_unit_id, rec.unit_id, rec.axis, differs)
    # at most k per (gold, axis), nearest first
    assert hard.groupby(["gold_unit_id", "axis"]).size().max() <= 3
    for _, part in hard.groupby(["gold_unit_id", "axis"]):
        assert part["similarity"].is_monotonic_decreasing
    # every gold has a row per axis in the pool sizes, empty pools included
    assert len(sizes) == len(set(golds)) * 4 and (sizes["pool"] == 0).any()


def test_restatements_get_revision_distractors(corpus):
    c, vecs = corpus
    restated = c.units[(c.units["revision"] == 2) & (c.units["template_id"] == "segment_bar")]["unit_id"]
    hard, _ = negatives.hard_negatives(c.units, vecs, restated, k=3)
    rev = hard[hard["axis"] == "revision"]
    assert set(rev["gold_unit_id"]) == set(restated)
    meta = c.units.set_index("unit_id")
    assert (meta.loc[rev["unit_id"], "revision"].to_numpy() == 1).all()


def test_clustering_fallback_without_metadata(corpus):
    c, vecs = corpus
    bare = c.units.assign(template_id="", entity="", metric="", period="")
    hard, _ = negatives.hard_negatives(bare, vecs, bare["unit_id"].head(5), k=3)
    assert hard.empty                                        # nothing to group by
    clustered, sizes = negatives.cluster_negatives(bare, vecs, list(bare["unit_id"].head(20)), n_clusters=8, k=3, seed=1)
    assert set(clustered["axis"]) == {"cluster"} and len(clustered) > 0
    assert (clustered["gold_unit_id"] != clustered["unit_id"]).all()
    # on the demo, the appearance clusters mostly keep a template together
    meta = c.units.set_index("unit_id")["template_id"]
    same = (meta[clustered["gold_unit_id"]].to_numpy() == meta[clustered["unit_id"]].to_numpy()).mean()
    assert same > 0.8


def test_random_negatives_are_seeded_and_never_the_gold(corpus):
    c, _ = corpus
    golds = list(c.units["unit_id"].head(10))
    a = negatives.random_negatives(c.units, golds, 5, seed=3)
    b = negatives.random_negatives(c.units, golds, 5, seed=3)
    assert a.equals(b) and len(a) == 50
    assert (a["gold_unit_id"] != a["unit_id"]).all()


def test_random_negatives_are_never_look_alikes(corpus):
    """Uniform draws from the ci corpus handed out a page of the gold's template for most golds; the
    random contrast must hold none (look-alikes belong to the hard set)."""
    c, _ = corpus
    golds = list(c.units.loc[c.units["template_id"] == "segment_bar", "unit_id"])
    r = negatives.random_negatives(c.units, golds, 9, seed=7)
    template = c.units.set_index("unit_id")["template_id"]
    assert len(r) == 9 * len(golds)
    assert (template[r["unit_id"]].to_numpy() != template[r["gold_unit_id"]].to_numpy()).all()
    bare = c.units.assign(template_id="")                     # no template metadata: every other page
    assert len(negatives.random_negatives(bare, golds, 9, seed=7)) == 9 * len(golds)


def test_top1_within_breaks_ties_by_unit_id_descending():
    scores = np.array([[0.5, 0.5, 0.1]], dtype=np.float32)
    ids = ["a", "b", "c"]
    assert negatives.top1_within(scores, ids, ["q"], {"q": "b"}, {"q": ["a"]})["q"] == 1.0   # tie: 'b' > 'a'
    assert negatives.top1_within(scores, ids, ["q"], {"q": "a"}, {"q": ["b"]})["q"] == 0.0
    assert negatives.top1_within(scores, ids, ["q"], {"q": "a"}, {"q": ["c"]})["q"] == 1.0
    assert negatives.top1_within(scores, ids, ["q"], {"q": "a"}, {"q": None})["q"] == 0.0    # whole corpus


def test_for_questions_expands_evidence_units():
    q = pd.DataFrame({"query_id": ["q1"], "evidence_unit_ids": ["a;b"]})
    d = pd.DataFrame({"gold_unit_id": ["a", "b"], "unit_id": ["x", "y"], "axis": ["period", "entity"],
                      "similarity": [0.9, 0.8]})
    out = negatives.for_questions(q, d)
    assert list(out.columns) == ["query_id", "gold_unit_id", "unit_id", "axis", "similarity"]
    assert list(out["unit_id"]) == ["x", "y"]          # sorted by gold, then axis


def test_document_scores_take_each_documents_best_page():
    s = np.array([[0.1, 0.9, 0.3, 0.2], [0.5, 0.0, 0.1, 0.7]])
    out, docs = negatives.document_scores(s, ["b", "a", "b", "a"])
    assert docs == ["a", "b"] and out.tolist() == [[0.9, 0.3], [0.7, 0.5]]


def test_document_negatives_same_entity_other_period_against_random():
    docs = pd.DataFrame({"doc_id": ["A1", "A2", "A3", "B1", "B2", "C1"], "entity": ["A", "A", "A", "B", "B", "C"],
                         "period": ["1", "2", "3", "1", "2", "1"]})
    hard, rand = negatives.document_negatives(docs, {"q": "A2", "r": "C1"}, seed=1)
    assert hard["q"] == ["A1", "A3"] and hard["r"] == []
    assert len(rand["q"]) == 2 and "A2" not in rand["q"] and len(rand["r"]) == 3
    assert (hard, rand) == negatives.document_negatives(docs, {"q": "A2", "r": "C1"}, seed=1)


def test_similarity_to_gold_says_how_much_closer_each_kind_of_distractor_is():
    import numpy as np
    import pandas as pd
    from lookalike.analysis import negatives
    units = pd.DataFrame({"unit_id": ["g", "near", "far"]})
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    d = pd.DataFrame({"gold_unit_id": ["g", "g"], "unit_id": ["near", "far"], "axis": ["period", "random"]})
    got = negatives.similarity_to_gold(d, units, vectors).set_index("axis")
    assert got.loc["period", "similarity_to_gold"] > 0.99 and got.loc["random", "similarity_to_gold"] == 0.0
    assert list(got["n"]) == [1, 1]


def test_harder_is_a_paired_test_on_the_same_questions():
    import numpy as np
    from lookalike.analysis import negatives
    units = ["g0", "g1", "g2", "g3", "h", "r"]
    q = ["q0", "q1", "q2", "q3"]
    gold = {f"q{i}": f"g{i}" for i in range(4)}
    # the gold beats the random page always, and loses to the look-alike on every question
    scores = np.array([[0.9 if u == gold[x] else 0.95 if u == "h" else 0.1 for u in units] for x in q])
    easy, hard = {x: ["r"] for x in q}, {x: ["h"] for x in q}
    outcomes = negatives.top1_outcomes(lambda rows: scores[list(rows)], units, q, gold, {"easy": easy, "hard": hard})
    got = negatives.harder(outcomes, "easy", "hard", n_boot=200)
    assert got["n"] == 4 and got["difference"] == 1.0 and got["harder"]
    same = negatives.harder(outcomes, "easy", "easy", n_boot=200)
    assert same["difference"] == 0.0 and not same["harder"]


def test_each_gold_gets_the_best_method_its_metadata_allows(corpus):
    """Metadata on part of the corpus: golds with a template get per-axis pools (or their template),
    golds without one get their appearance cluster — never a hard set of the gold alone (seen on photos
    with metadata on two thirds: 19 of 60 golds ranked alone, each 'sufficient' by construction)."""
    c, vecs = corpus
    units = c.units.copy()
    bare = units["unit_id"].iloc[::3]
    units.loc[units["unit_id"].isin(set(bare)), ["template_id", "entity", "metric", "period"]] = ""
    golds = list(units["unit_id"].iloc[:30])
    hard, _ = negatives.look_alikes(units, vecs, golds, k=3, n_clusters=6, cluster_k=20, seed=1)
    clustered = set(hard.loc[hard["axis"] == "cluster", "gold_unit_id"])
    assert clustered == set(golds) & set(bare)
    assert (hard[hard["axis"] == "cluster"].groupby("gold_unit_id").size() <= 20).all()
    questions = pd.DataFrame({"query_id": [f"q{i}" for i in range(len(golds))], "evidence_unit_ids": golds})
    dis = negatives.for_questions(questions, hard)
    kept, table = negatives.hard_sets(questions, dis, units, set(questions["query_id"]), 5)
    method = dict(zip(table["query_id"], table["method"]))
    gold_of = dict(zip(questions["query_id"], golds))
    assert all(method[q] == "cluster" for q in method if gold_of[q] in clustered)
    assert {method[q] for q in method if gold_of[q] not in clustered} <= {"per-axis", "template"}
    assert (table["candidates"] > 1).all()
    # in the hard columns exactly when the set is larger than the largest k, and a reason otherwise
    assert set(kept) == set(table.loc[table["candidates"] > 5, "query_id"])
    assert (table.loc[~table["in_hard"], "reason"] != "").all() and (table.loc[table["in_hard"], "reason"] == "").all()


def test_a_hard_set_no_larger_than_k_is_outside_the_hard_columns():
    units = pd.DataFrame({"unit_id": ["a", "b", "c", "d", "e", "f", "g"], "template_id": ["t"] * 4 + ["u"] * 3})
    questions = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "evidence_unit_ids": ["a", "e", "a;b"]})
    empty = pd.DataFrame(columns=["query_id", "gold_unit_id", "unit_id", "axis", "similarity"])
    kept, table = negatives.hard_sets(questions, empty, units, {"q1", "q2"}, 3)
    row = table.set_index("query_id")
    assert kept == {"q1": ["a", "b", "c", "d"]} and row.loc["q1", "method"] == "template"
    assert not row.loc["q2", "in_hard"] and "not more than 3" in row.loc["q2", "reason"]
    assert not row.loc["q3", "in_hard"] and "one evidence unit" in row.loc["q3", "reason"]


def test_a_large_template_gives_each_gold_a_fixed_sample_of_template_k_look_alikes():
    """Template look-alikes are capped at negatives.template_k: the same ones whatever order the corpus
    lists its units in, the same for every question of a gold, every per-axis distractor still kept;
    a template within the cap gives all of its units, and the stage's note names the capped templates."""
    ids = [f"u{i:03d}" for i in range(60)]
    units = pd.DataFrame({"unit_id": ids, "template_id": ["t"] * 51 + ["s"] * 9})
    questions = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "evidence_unit_ids": ["u000", "u000", "u055"]})
    near = pd.DataFrame({"query_id": ["q1"], "gold_unit_id": ["u000"], "unit_id": ["u049"], "axis": ["period"],
                         "similarity": [0.9]})
    got = negatives.hard_candidates(questions, near, units, template_k=8)
    assert got["q1"][:2] == ["u000", "u049"] and len(got["q1"]) in (9, 10)       # the distractor, and 8 of the template
    assert set(got["q2"]) - {"u049"} <= set(got["q1"]) and len(got["q2"]) == 9
    shuffled = units.sample(frac=1, random_state=3).reset_index(drop=True)
    assert {q: sorted(c) for q, c in negatives.hard_candidates(questions, near, shuffled, template_k=8).items()} == \
        {q: sorted(c) for q, c in got.items()}
    assert sorted(got["q3"]) == ids[51:]                                               # 8 others: all of them
    assert negatives.template_sample("g", ["a", "b"], 2) == ["a", "b"]
    note = negatives.capped_templates_note(units, 8)
    assert note.startswith("1 template hold") and "the largest has 51 units" in note and negatives.capped_templates_note(units, 50) == ""


def test_check_can_say_which_method_will_cover_each_gold():
    """Seen on photos with a template and an entity only: check promised per-axis pools, and none
    could be formed (a per-axis pool varies one field with the others fixed: metric or period needed)."""
    units = pd.DataFrame({"unit_id": list("abcdefg"), "template_id": ["t", "t", "t", "s", "s", "", ""],
                          "entity": ["x", "y", "z", "x", "x", "", ""], "metric": ["", "", "", "m", "m", "", ""],
                          "period": ["", "", "", "2023", "2024", "", ""]})
    assert negatives.planned_methods(units, ["a", "d", "f"]) == {"per-axis": 1, "template": 1, "cluster": 1}


def test_top1_carries_what_a_random_ranking_of_the_same_candidates_scores():
    units = [f"u{i}" for i in range(10)]
    scores = np.tile(np.arange(10, dtype="float32"), (2, 1))
    gold = {"q1": "u9", "q2": "u0"}
    sets = {"hard": {"q1": ["u1", "u2", "u3"], "q2": ["u5"]},      # 1 of 4 and 1 of 2
            "corpus": {"q1": None, "q2": None}}                    # 1 of 10
    outcomes = negatives.top1_outcomes(lambda rows: scores[list(rows)], units, ["q1", "q2"], gold, sets)
    t = negatives.top1_table({"s": outcomes}, units, gold, sets, seed=0, n_boot=50).set_index("negatives")
    assert t.loc["hard", "chance"] == pytest.approx((1 / 4 + 1 / 2) / 2)
    assert t.loc["corpus", "chance"] == pytest.approx(0.1)
    # any of several acceptable golds counts: two of the three candidates are gold
    assert negatives.top1_chance(units, ["q1"], {"q1": {"u1", "u2"}}, {"q1": ["u3"]}) == pytest.approx(2 / 3)


def test_parameters_that_make_hard_sets_too_small_put_every_question_outside(corpus):
    """negatives.cluster_k: 3 on a corpus without metadata gives each gold 3 look-alikes: 4 candidates, so
    sufficient@5 would hold every gold by construction. No parameter makes that a claim: every question is
    outside the hard columns, with its reason, and the verdict names no system."""
    from lookalike.report import claims

    c, vecs = corpus
    units = c.units.copy()
    units[["template_id", "entity", "metric", "period"]] = ""
    golds = list(units["unit_id"].iloc[:12])
    hard, _ = negatives.look_alikes(units, vecs, golds, k=3, n_clusters=4, cluster_k=3, seed=1)
    questions = pd.DataFrame({"query_id": [f"q{i}" for i in range(len(golds))], "evidence_unit_ids": golds})
    kept, table = negatives.hard_sets(questions, negatives.for_questions(questions, hard), units, set(questions["query_id"]), 5)
    assert kept == {} and (table["candidates"] <= 4).all() and not table["in_hard"].any()
    assert table["reason"].str.contains("not more than 5").all()
    suff = pd.DataFrame([dict(system=s, negatives="hard", k=5, n=0, sufficient=float("nan"), sufficient_lo=float("nan"),
                              sufficient_hi=float("nan")) for s in ("a", "b")])
    verdict = claims.verdict_claim(suff, pd.DataFrame(columns=["measure", "system", "baseline", "p_holm"]), table)
    assert verdict["kind"] == "none" and not verdict.get("figures")
    assert claims.render(verdict).startswith("No system can be named best under hard negatives")


def test_top1_outcomes_a_block_at_a_time_equal_the_whole_matrix(monkeypatch):
    """At 100,000 units stage 04 held a question x unit matrix per system (6.5 GiB) to read top-1: the
    outcomes are now read a block of questions at a time, and must equal top1_within on the whole matrix
    (scores full of ties, golds inside and outside, some questions without negatives of a kind)."""
    rng = np.random.default_rng(5)
    units = [f"u{i:03d}" for i in rng.permutation(60)]
    queries = [f"q{i}" for i in range(23)]
    scores = rng.integers(0, 4, size=(len(queries), len(units))).astype(np.float32)    # many ties
    gold = {q: units[rng.integers(60)] for q in queries}
    gold["q3"] = {units[0], units[1]}                                                  # any of several
    sets = {"hard": {q: list(rng.choice(units, size=int(rng.integers(0, 4)), replace=False)) for q in queries},
            "corpus": {q: None for q in queries}}
    seen = []
    monkeypatch.setattr(negatives, "TOP1_BLOCK_CELLS", 5 * len(units))

    def rows_of(rows):
        seen.append(len(rows))
        return scores[list(rows)]

    got = negatives.top1_outcomes(rows_of, units, queries, gold, sets)
    assert max(seen) == 5 and sum(seen) == len(queries)
    assert got["corpus"].tolist() == negatives.top1_within(scores, units, queries, gold, sets["corpus"]).tolist()
    with_hard = [q for q in queries if sets["hard"][q]]
    want = negatives.top1_within(scores[[queries.index(q) for q in with_hard]], units, with_hard, gold, sets["hard"])
    assert got["hard"].dropna().to_dict() == want.to_dict()
    assert got["hard"].isna().sum() == len(queries) - len(with_hard)          # no look-alikes: not a win
    # the whole-corpus winner by brute force: the highest (score, unit id)
    for i, q in enumerate(queries):
        best = max(zip(scores[i], units))[1]
        assert got.loc[q, "corpus"] == float(best in ({gold[q]} if isinstance(gold[q], str) else gold[q]))
