"""The summary's claims as data (report.claims) and the audit that derives them again
(report.audit: claims, re-derived, recorded, no-nan on tables): the verdict's rules on made-up
tables, and tampering with a finished run's page, claims, tables and files."""

from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest

from lookalike.report import audit
from lookalike.report import claims
from lookalike.stages import STAGES


def _suff(rows, k=5):
    """rows: (system, value, lo, n)."""
    return pd.DataFrame([dict(system=s, negatives="hard", k=k, n=n, sufficient=v, sufficient_lo=lo,
                              sufficient_hi=min(1.0, v + 0.1)) for s, v, lo, n in rows])


def _sig(*pairs):
    return pd.DataFrame([dict(measure="sufficient@5 (hard)", system=a, baseline=b, p_holm=p) for a, b, p in pairs])


def _hard(n, candidates=20, outside=0):
    rows = [dict(query_id=f"q{i}", method="per-axis", candidates=candidates, in_hard=True, reason="") for i in range(n)]
    rows += [dict(query_id=f"x{i}", method="cluster", candidates=4, in_hard=False, reason="4 candidates")
             for i in range(outside)]
    return pd.DataFrame(rows)


def test_chance_under_hard_negatives_is_k_over_the_candidates():
    assert claims.hard_chance(_hard(3, candidates=20), 5) == pytest.approx(0.25)
    assert claims.hard_chance(_hard(3, candidates=10, outside=2), 1) == pytest.approx(0.1)   # outside rows left out
    assert claims.hard_chance(_hard(0), 5) != claims.hard_chance(_hard(0), 5)                  # nan: nothing inside


def test_best_is_said_only_where_the_paired_test_separates():
    suff = _suff([("bm25", 0.6, 0.5, 40), ("colpali", 0.9, 0.8, 40), ("clip", 0.5, 0.4, 40)])
    ahead = claims.verdict_claim(suff, _sig(("bm25", "colpali", 0.0004), ("colpali", "clip", 0.001)), _hard(40))
    assert ahead["kind"] == "ahead" and ahead["best"] == "colpali" and ahead["behind"] == ["bm25", "clip"]
    text = claims.render(ahead)
    assert text.startswith("Best under hard negatives: colpali") and "0.90 [0.80, 1.00]" in text
    assert "the next, bm25 at 0.60 [0.50, 0.70], Holm-adjusted p < 0.001" in text and "of the 40 questions" in text
    assert "random ranking of the same candidates would do so for a share of 0.25" in text
    level = claims.verdict_claim(suff, _sig(("colpali", "bm25", 0.2), ("colpali", "clip", 0.01)), _hard(40))
    assert level["kind"] == "not-distinguishable" and level["peers"] == ["bm25"] and level["behind"] == ["clip"]
    said = claims.render(level)
    assert said.startswith("No single best under hard negatives: colpali")
    assert "not distinguishable from bm25 at 0.60 [0.50, 0.70] (Holm-adjusted p = 0.200)" in said
    assert "ahead of clip" in said
    untested = claims.render(claims.verdict_claim(suff, _sig(("clip", "bm25", 0.01)), _hard(40)))
    assert "no paired test was run" in untested


def test_a_system_at_chance_is_never_best_nor_level_with_one_above_it():
    """Seen on photos without metadata: OCR systems at chance were declared 'tied' with the caption
    system because every hard set was the gold and three neighbours."""
    suff = _suff([("caption", 0.9, 0.8, 30), ("ocr", 0.3, 0.1, 30), ("bm25", 0.28, 0.2, 30)])
    claim = claims.verdict_claim(suff, _sig(("caption", "ocr", 0.3), ("caption", "bm25", 0.3)), _hard(30, candidates=20))
    assert claim["at_chance"] == ["ocr", "bm25"] and claim["kind"] == "only" and claim["peers"] == []
    said = claims.render(claim)
    assert "the only system above chance" in said and "ocr and bm25 are indistinguishable from chance there" in said
    nobody = claims.verdict_claim(_suff([("a", 0.3, 0.1, 30), ("b", 0.2, 0.1, 30)]), _sig(("a", "b", 0.5)), _hard(30))
    assert nobody["kind"] == "chance" and claims.render(nobody).startswith("No system is distinguishable from chance")


def test_no_question_inside_the_hard_columns_names_no_best():
    none = claims.verdict_claim(_suff([]), pd.DataFrame(), _hard(0, outside=5))
    assert none["kind"] == "none" and claims.render(none).startswith("No system can be named best")
    assert claims.render(claims.verdict_claim(_suff([("a", 0.5, 0.4, 0)]), pd.DataFrame(), _hard(0))).startswith("No system")


def test_the_verdict_calls_an_image_folders_units_images():
    said = claims.render(claims.verdict_claim(_suff([("a", 0.9, 0.8, 10), ("b", 0.5, 0.45, 10)]), _sig(("a", "b", 0.01)),
                                      _hard(10), noun="image"))
    assert "a sufficient image in its top 5" in said and "page" not in said


def test_what_was_scored_reconciles_every_n():
    validation = pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4", "q5"],
                               "status": ["valid", "valid", "valid", "gold_fails", "no_page_evidence"]})
    hard = pd.DataFrame({"query_id": ["q1", "q2"], "method": ["per-axis", "cluster"], "candidates": [12, 4],
                         "in_hard": [True, False], "reason": ["", "4 candidates"]})
    claim = claims.scored_claim(validation, validation, ["q1", "q2", "q3"], ["q1", "q2"], hard, random_n=4)
    text = claims.render(claim)
    assert text.startswith("3 of 5 questions are scored")
    assert "1 — the judge found their gold page does not answer them" in text and "1 — no page judgements" in text
    assert "the hard columns on the 1 of them" in text and "1 need more than one page" in text
    assert "1 have a hard set of 5 or fewer" in text and "the 4 questions as generated" in text
    empty = claims.scored_claim(validation.iloc[:0], validation.iloc[:0], [], [], hard.iloc[:0], 0)
    assert claims.render(empty) == "No questions: nothing was scored."


# ----------------------------------------------------------------------------- the audit on a finished run


@pytest.fixture()
def run_copy(ci_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(ci_run, out, ignore=shutil.ignore_patterns("vectors", "corpus", "store"))
    return out


def _lines(run_dir):
    return [v.line() for v in audit.audit(run_dir, list(STAGES))]


def _rehash(run_dir, *rels):
    """Record a file's new bytes in the manifest, as someone hiding an edit would."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for rel in rels:
        manifest["files"][rel] = hashlib.sha256((run_dir / rel).read_bytes()).hexdigest()
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def test_the_finished_run_holds_every_claim(run_copy):
    """Every invariant of lookalike audit on the ci run (people's figures against the label database too),
    as the shape lane checks every generated shape."""
    from lookalike.cli import audit as audit_cli

    assert [v.line() for v in audit_cli.full(run_copy)] == []
    record = json.loads((run_copy / "claims.json").read_text())
    assert [c["id"] for c in record["claims"]][:2] == ["scored", "verdict"]


def test_a_number_changed_on_the_page_fails_naming_the_claim(run_copy):
    verdict = json.loads((run_copy / "claims.json").read_text())["claims"][1]
    shown = f"{verdict['figures'][0]['value']:.2f} [{verdict['figures'][0]['lo']:.2f}"
    page = run_copy / "summary.html"
    page.write_text(page.read_text().replace(shown, "0.05 [" + shown.split("[")[1], 1))
    _rehash(run_copy, "summary.html")
    lines = _lines(run_copy)
    assert any(line.startswith("claims: summary.html: claim verdict: the page does not say") for line in lines), lines


def test_a_number_changed_in_claims_json_fails_naming_the_claim(run_copy):
    path = run_copy / "claims.json"
    record = json.loads(path.read_text())
    record["claims"][1]["figures"][0]["value"] = 0.05
    path.write_text(json.dumps(record))
    _rehash(run_copy, "claims.json")
    lines = _lines(run_copy)
    assert any("claim verdict" in line and "is not what its figures say" in line for line in lines), lines
    assert any("claim verdict" in line and "in tables/sufficiency.csv" in line for line in lines), lines


def test_a_number_changed_in_a_table_fails_naming_the_table(run_copy):
    t = pd.read_csv(run_copy / "tables" / "systems.csv", keep_default_na=False)
    t.loc[t["system"] == "ocr-bm25", "recall_10"] = 0.5
    t.to_csv(run_copy / "tables" / "systems.csv", index=False)
    suff = pd.read_csv(run_copy / "tables" / "sufficiency.csv", keep_default_na=False)
    suff.loc[(suff["negatives"] == "hard") & (suff["k"] == 5), "sufficient"] = 0.5
    suff.to_csv(run_copy / "tables" / "sufficiency.csv", index=False)
    _rehash(run_copy, "tables/systems.csv", "tables/sufficiency.csv")
    lines = _lines(run_copy)
    assert any(line.startswith("reproducible: tables/systems.csv: recall_10, ocr-bm25") for line in lines), lines
    assert any(line.startswith("reproducible: tables/sufficiency.csv: sufficient@5") for line in lines), lines
    assert any(line.startswith("reproducible: tables/headline.csv: sufficient@5") for line in lines), lines
    assert any("claim verdict" in line for line in lines), lines


def test_a_deleted_file_or_a_nan_cell_fails_naming_the_file(run_copy):
    (run_copy / "tables" / "haystack_curve.csv").unlink()
    (run_copy / "qrels" / "labels.qrels").unlink()
    table = run_copy / "tables" / "top1_random_original.csv"
    table.write_text(table.read_text().replace("0.099999999999999992", "nan", 1))
    lines = _lines(run_copy)
    assert "recorded: tables/haystack_curve.csv: the file: listed in manifest.json, and missing" in lines
    assert "recorded: qrels/labels.qrels: the file: listed in manifest.json, and missing" in lines
    assert any(line.startswith("no-nan: tables/top1_random_original.csv: chance") for line in lines), lines


def test_a_tie_between_a_chance_level_and_an_above_chance_system_fails(run_copy):
    path = run_copy / "claims.json"
    record = json.loads(path.read_text())
    verdict = record["claims"][1]
    low = verdict["figures"][-1]
    low["lo"] = 0.0                                  # its CI reaches chance
    verdict["kind"] = "not-distinguishable"
    verdict["peers"] = [low["key"]["system"]]
    verdict["behind"] = [s for s in verdict["behind"] if s != low["key"]["system"]]
    verdict["text"] = claims.render(verdict)
    path.write_text(json.dumps(record))
    _rehash(run_copy, "claims.json")
    page = run_copy / "summary.html"
    lines = _lines(run_copy)
    assert any(f"claim verdict, {low['key']['system']}: indistinguishable from chance" in line for line in lines), lines
    assert any("derived again from the tables it says" in line for line in lines), lines
    assert page.is_file()


def test_a_saturated_hard_column_fails(run_copy):
    """A question in the hard columns ranked among 5 or fewer candidates: sufficient@5 holds its gold
    by construction."""
    hard = pd.read_csv(run_copy / "tables" / "hard_sets.csv", keep_default_na=False)
    q = hard.loc[hard["in_hard"].astype(str) == "True", "query_id"].iloc[0]
    hard.loc[hard["query_id"] == q, "candidates"] = 4
    hard.to_csv(run_copy / "tables" / "hard_sets.csv", index=False)
    best = json.loads((run_copy / "claims.json").read_text())["claims"][1]["best"]
    run = run_copy / "runs_hard" / f"{best}.run"
    kept = [line for line in run.read_text().splitlines() if not (line.split()[0] == q and int(line.split()[3]) > 3)]
    run.write_text("\n".join(kept) + "\n")
    _rehash(run_copy, "tables/hard_sets.csv", f"runs_hard/{best}.run")
    lines = _lines(run_copy)
    assert any("tables/hard_sets.csv: claim verdict: saturated by construction" in line for line in lines), lines
    assert any(f"runs_hard/{best}.run: claim verdict: saturated by construction" in line for line in lines), lines


def test_tied_scores_that_settle_a_figure_are_counted_and_said():
    """Seen on a filings benchmark: one caption score covered every page of a document, so 5 of 20
    hard-negative wins were settled by unit-id order and nothing said so."""
    run = pd.DataFrame({"query_id": ["q1"] * 7 + ["q2"] * 7, "unit_id": [f"u{i}" for i in range(14)],
                        "score": [0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8] + [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]})
    gold = {"q1": "u6", "q2": "u12"}          # q1: five tie with the gold across rank 5; q2: no tie
    assert claims.tie_settled(run, gold, 5) == 1 and claims.tie_settled(run, {"q1": "u0"}, 5) == 0
    claim = claims.verdict_claim(_suff([("a", 0.9, 0.8, 2), ("b", 0.5, 0.45, 2)]), _sig(("a", "b", 0.01)), _hard(2),
                             ties={"a": 1, "b": 0})
    assert "Tied scores settled whether the gold is in the top 5" in claims.render(claim)
    assert "1 of the 2 questions for a" in claims.render(claim) and "for b" not in claims.render(claim)


def test_a_tie_count_changed_in_claims_json_fails(run_copy):
    path = run_copy / "claims.json"
    record = json.loads(path.read_text())
    fig = record["claims"][1]["figures"][0]
    fig["ties"] = int(fig.get("ties", 0)) + 3
    record["claims"][1]["text"] = claims.render(record["claims"][1])
    path.write_text(json.dumps(record))
    _rehash(run_copy, "claims.json")
    lines = _lines(run_copy)
    assert any(f"claim verdict, {fig['key']['system']} ties" in line for line in lines), lines


def test_every_other_sentence_is_derived_again_from_its_table(run_copy):
    record = json.loads((run_copy / "claims.json").read_text())
    derived = {c["id"] for c in record["claims"] if c["kind"] == "derived"}
    assert {"hard_words", "harder_words", "haystack_sentence", "planner_words"} <= derived
    t = pd.read_csv(run_copy / "tables" / "hard_vs_random.csv", keep_default_na=False)
    t.loc[0, "difference"] = float(t.loc[0, "difference"]) + 0.5
    t.to_csv(run_copy / "tables" / "hard_vs_random.csv", index=False)
    _rehash(run_copy, "tables/hard_vs_random.csv")
    lines = _lines(run_copy)
    assert any(line.startswith("claims: claims.json: claim harder_words: derived again from hard_vs_random")
               for line in lines), lines


def test_what_the_labels_rest_on_is_derived_again(run_copy):
    """The labels' sentences (who made them, their agreement with the adjudicator) are claims too: a
    label table edited by hand no longer says what the page says."""
    record = json.loads((run_copy / "claims.json").read_text())
    assert {"labels_made", "labels_rest_on"} <= {c["id"] for c in record["claims"]}
    t = pd.read_csv(run_copy / "tables" / "labels_current.csv", keep_default_na=False)
    t.loc[t.index[:10], "source"] = "model"
    t.to_csv(run_copy / "tables" / "labels_current.csv", index=False)
    _rehash(run_copy, "tables/labels_current.csv")
    lines = _lines(run_copy)
    assert any(line.startswith("claims: claims.json: claim labels_rest_on: derived again") for line in lines), lines


def test_the_lead_says_what_a_best_system_reads_when_not_the_pixels_and_a_ceiling():
    """Read on the photos-blind-queries shape: the lead named caption-minilm best at 1.00 [1.00, 1.00]
    without saying it reads the captions, nor that a figure at the ceiling cannot rank it against a better one."""
    suff = pd.DataFrame([{"system": s, "negatives": "hard", "k": 5, "n": 14, "sufficient": v, "sufficient_lo": lo,
                          "sufficient_hi": hi} for s, v, lo, hi in (("caption-minilm", 1.0, 1.0, 1.0),
                                                                    ("ocr-bm25", 0.5, 0.29, 0.79))])
    hard = pd.DataFrame({"query_id": [f"q{i}" for i in range(14)], "in_hard": "True", "candidates": 13})
    sig = pd.DataFrame([{"measure": "sufficient@5 (hard)", "system": "caption-minilm", "baseline": "ocr-bm25",
                         "p_holm": 0.001}])
    systems = pd.DataFrame({"system": ["caption-minilm", "ocr-bm25"], "provenance": ["caption-text", "pixels"]})
    claim = claims.verdict_claim(suff, sig, hard, noun="image", reads=claims.reads_of(systems))
    said = claims.render(claim)
    assert claim["reads"] == "the caption fields" and claim["ceiling"] is True
    assert said.startswith("Best under hard negatives: caption-minilm (which reads the caption fields, not the "
                           "image's pixels) puts a sufficient image in its top 5")
    assert "caption-minilm is at the ceiling" in said
    pixels = claims.verdict_claim(suff.assign(system=["ocr-minilm", "ocr-bm25"]), sig.assign(system="ocr-minilm"),
                                  hard, reads=claims.reads_of(systems))
    assert "reads" not in pixels and "which reads" not in claims.render(pixels)


def test_a_run_file_removed_with_its_manifest_entry_is_still_missed(run_copy):
    """The catalogue: a run file removed together with its manifest entry passed the audit; the tables still
    name the system it scored, so its absence is a violation."""
    system = sorted(p.stem for p in (run_copy / "runs_validated").glob("*.run"))[0]
    (run_copy / "runs_validated" / f"{system}.run").unlink()
    manifest = json.loads((run_copy / "manifest.json").read_text())
    del manifest["files"][f"runs_validated/{system}.run"]
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    lines = _lines(run_copy)
    assert any(line.startswith(f"reproducible: runs_validated/{system}.run:") and "its ranking is missing" in line
               for line in lines), lines


def test_the_audit_says_what_it_re_derives_and_what_it_guards_by_hash_only(run_copy, capsys):
    from lookalike.cli.audit import main

    derived, hashed = audit.coverage(run_copy)
    recorded = set(json.loads((run_copy / "manifest.json").read_text())["files"])
    assert {r for r, _ in derived} | set(hashed) == recorded and not {r for r, _ in derived} & set(hashed)
    assert "tables/sufficiency.csv" in dict(derived) and "tables/top1_random_original.csv" in hashed
    assert main([str(run_copy)]) == 0
    err = capsys.readouterr().err
    assert f"{len(derived)} file(s) re-derived from others" in err and f"{len(hashed)} checked by their sha256 only" in err
