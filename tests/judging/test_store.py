"""The judge pool, the append-only label store, import, and the labelling page in a real browser."""

import json
import shutil
import time

import pandas as pd
import pytest
from lookalike.judging import store as L

from tests.conftest import headless_chrome, make_png, needs_chromium


def lab(q, u, label, source="model", judge="answer-string", note=""):
    return {"query_id": q, "unit_id": u, "label": label, "judge": judge, "source": source, "note": note}


def test_store_is_append_only_and_people_win(tmp_path):
    store = L.LabelStore(tmp_path / "store.jsonl")
    assert store.append([lab("q1", "u1", "sufficient"), lab("q1", "u2", "irrelevant")]) == 2
    assert store.append([lab("q1", "u1", "sufficient")]) == 0            # identical: nothing added
    assert store.append([lab("q1", "u1", "supporting", "human", "ana")]) == 1
    # a later model label never overrides a person's
    assert store.append([lab("q1", "u1", "irrelevant", "model", "vlm")]) == 1
    cur = L.LabelStore(tmp_path / "store.jsonl").current().set_index("unit_id")
    assert cur.loc["u1", "label"] == "supporting" and cur.loc["u1", "source"] == "human"
    assert cur.loc["u2", "label"] == "irrelevant" and not cur.loc["u2", "adjudicated"]
    # the file only grew: every line written is still there, in order
    lines = (tmp_path / "store.jsonl").read_text().splitlines()
    assert [json.loads(x)["label"] for x in lines] == ["sufficient", "irrelevant", "supporting", "irrelevant"]
    # two people disagreeing: both kept, the latest is current, the pair is flagged
    store.append([lab("q1", "u1", "sufficient", "human", "ben")])
    cur = store.current().set_index("unit_id")
    assert cur.loc["u1", "label"] == "sufficient" and cur.loc["u1", "conflict"]
    assert len(store.conflicts()) == 2


def test_store_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "store.jsonl"
    # a damaged line inside the store stops the read (only a torn last line is set aside by itself)
    path.write_text(json.dumps(lab("q", "u", "sufficient")) + "\n{not json\n" + json.dumps(lab("q", "v", "supporting")) + "\n")
    with pytest.raises(L.LabelError, match="store.jsonl: line 2 is not JSON"):
        L.LabelStore(path)
    path.write_text(json.dumps(lab("q", "u", "relevant")) + "\n")
    with pytest.raises(L.LabelError, match="line 1: label 'relevant' is not one of"):
        L.LabelStore(path)
    with pytest.raises(L.LabelError, match="source 'robot'"):
        L.LabelStore(tmp_path / "new.jsonl").append([lab("q", "u", "sufficient", "robot")])


def test_qrels_from_current_labels_use_the_three_way_grades(tmp_path):
    store = L.LabelStore(tmp_path / "s.jsonl")
    store.append([lab("q", "a", "sufficient"), lab("q", "b", "supporting"), lab("q", "c", "irrelevant")])
    q = L.qrels_from(store.current())
    assert dict(zip(q["unit_id"], q["relevance"])) == {"a": 2, "b": 1, "c": 0}


@pytest.fixture
def page_setup(tmp_path):
    units = pd.DataFrame({"unit_id": [f"doc:{i}" for i in range(1, 5)],
                          "image_path": [f"img/p{i}.png" for i in range(1, 5)],
                          "filename": ["secret-name.png"] * 4, "caption": ["a caption nobody may see"] * 4})
    for i, color in enumerate([(200, 0, 0), (0, 200, 0), (0, 0, 200), (90, 90, 90)], start=1):
        make_png(tmp_path / "img" / f"p{i}.png", color, (120, 80))
    questions = pd.DataFrame({"query_id": ["q1", "q2"],
                              "text": ['Revenue </script><script>alert("x")</script> & more?', "Operating income?"]})
    pairs = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"], "unit_id": ["doc:1", "doc:2", "doc:3", "doc:4"]})
    page = L.labelling_page(pairs, questions, units, tmp_path, tmp_path / "labelling", seed=3)
    return tmp_path, page, pairs


def test_page_is_blind_self_contained_and_escaped(page_setup):
    root, page, pairs = page_setup
    html = page.read_text()
    assert "secret-name" not in html and "a caption nobody" not in html and "doc:1" not in html
    assert "http://" not in html and "https://" not in html            # opens offline
    assert "</script><script>alert" not in html                         # corpus text cannot close the script
    key = pd.read_csv(root / "labelling" / "key.csv")
    assert len(key) == 4 and set(key["unit_id"]) == set(pairs["unit_id"])


def test_import_merges_and_keeps_conflicts(page_setup, tmp_path):
    root, page, pairs = page_setup
    key = pd.read_csv(root / "labelling" / "key.csv")
    store = L.LabelStore(tmp_path / "store.jsonl")
    store.append([{"query_id": "q1", "unit_id": "doc:1", "label": "irrelevant", "judge": "ana", "source": "human"}])
    export = tmp_path / "export.csv"
    pid = dict(zip(zip(key["query_id"], key["unit_id"]), key["pair_id"]))
    export.write_text("pair_id,label,note,time\n"
                      f"{pid[('q1', 'doc:1')]},sufficient,\"looks right, I think\",2026-11-30T10:00:00Z\n"
                      f"{pid[('q2', 'doc:3')]},supporting,,2026-11-30T10:00:05Z\n"
                      "ffffffffffff,irrelevant,,\n")
    result = L.import_export(export, root / "labelling" / "key.csv", store)
    assert result["added"] == 2 and result["unknown"] == ["ffffffffffff"] and result["conflicting_pairs"] == 1
    again = L.import_export(export, root / "labelling" / "key.csv", store)
    assert again["added"] == 0 and again["already_held"] == 2
    rows = store.frame()
    assert (rows["label"] == "irrelevant").sum() == 1                    # the earlier human label is still there
    assert rows.iloc[1]["note"] == "looks right, I think" and rows.iloc[1]["time"] == "2026-11-30T10:00:00Z"
    bad = tmp_path / "bad.csv"
    bad.write_text("pair_id,label\nabc,maybe\n")
    with pytest.raises(L.LabelError, match="bad.csv: row 1 label 'maybe'"):
        L.import_export(bad, root / "labelling" / "key.csv", store)


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_labelling_page_end_to_end_in_headless_chromium(page_setup, tmp_path):
    from selenium.webdriver.common.by import By

    root, page, pairs = page_setup
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver = headless_chrome(prefs={"download.default_directory": str(downloads),
                                    "download.prompt_for_download": False})
    try:
        driver.get(page.as_uri())
        body = driver.find_element(By.TAG_NAME, "body")
        assert driver.find_element(By.ID, "progress").text == "0 of 4 labelled"
        shown = driver.find_element(By.ID, "q").text
        assert shown in ('Revenue </script><script>alert("x")</script> & more?', "Operating income?")
        body.send_keys("1")                                   # sufficient
        driver.find_element(By.ID, "note").send_keys("checked the footnote")
        body.send_keys("3")                                   # irrelevant, with the note
        body.send_keys("u")                                   # undo it
        assert driver.find_element(By.ID, "progress").text == "1 of 4 labelled"
        driver.find_element(By.ID, "note").send_keys("checked the footnote")
        body.send_keys("p")                                   # supporting, with the note
        body.send_keys("i")
        body.send_keys("2")
        assert driver.find_element(By.ID, "progress").text == "4 of 4 labelled"
        driver.find_element(By.ID, "csv").click()
        driver.find_element(By.ID, "json").click()
        deadline = time.time() + 20
        while time.time() < deadline and (len(list(downloads.glob("*.csv"))) < 1 or len(list(downloads.glob("*.json"))) < 1
                                          or list(downloads.glob("*.crdownload"))):
            time.sleep(0.2)
    finally:
        driver.quit()
    csv_file, json_file = next(downloads.glob("*.csv")), next(downloads.glob("*.json"))
    exported = pd.read_csv(csv_file, dtype=str, keep_default_na=False)
    assert list(exported["label"]) == ["sufficient", "supporting", "irrelevant", "supporting"]
    assert list(exported["note"]) == ["", "checked the footnote", "", ""]
    assert [r["label"] for r in json.loads(json_file.read_text())] == list(exported["label"])
    # import into the store and check what it holds
    store = L.LabelStore(tmp_path / "store.jsonl")
    result = L.import_export(csv_file, root / "labelling" / "key.csv", store)
    assert result["added"] == 4 and not result["unknown"]
    key = pd.read_csv(root / "labelling" / "key.csv").set_index("pair_id")
    held = store.frame()
    assert set(held["source"]) == {"human"}
    expected = {(key.loc[p, "query_id"], key.loc[p, "unit_id"]): lab for p, lab in zip(exported["pair_id"], exported["label"])}
    assert {(q, u): lab for q, u, lab in zip(held["query_id"], held["unit_id"], held["label"])} == expected
    # the CLI does the same for a run folder
    from lookalike.cli import main

    run_dir = tmp_path / "run"
    (run_dir / "labelling").mkdir(parents=True)
    shutil.copy(root / "labelling" / "key.csv", run_dir / "labelling" / "key.csv")
    assert main(["labels", "import", str(json_file), "--run-dir", str(run_dir)]) == 0
    assert len(L.LabelStore(run_dir / "labels" / "store.jsonl").current()) == 4


def test_labels_for_another_wording_do_not_count(tmp_path):
    store = L.LabelStore(tmp_path / "s.jsonl")
    old, new = L.question_sha("Which segment sold most?"), L.question_sha("Which segment sold most in Q2 FY2024?")
    store.append([{**lab("q", "a", "sufficient", "human", "ana"), "question_sha": old}])
    store.append([{**lab("q", "a", "irrelevant", "model"), "question_sha": new}])
    assert store.current({"q": old}).loc[0, "label"] == "sufficient"
    cur = store.current({"q": new})
    assert cur.loc[0, "label"] == "irrelevant" and not cur.loc[0, "adjudicated"]
    assert len(store.frame()) == 2                                     # nothing was dropped from the store


@pytest.mark.parametrize("order", ["human first", "reference first", "model last", "re-run after import"])
def test_a_persons_label_is_never_overridden_in_any_order(tmp_path, order):
    human = {"query_id": "q", "unit_id": "u", "label": "supporting", "judge": "human", "source": "human"}
    reference = {"query_id": "q", "unit_id": "u", "label": "sufficient", "judge": "reference", "source": "reference"}
    model = {"query_id": "q", "unit_id": "u", "label": "irrelevant", "judge": "answer-string", "source": "model"}
    writes = {"human first": [human, reference, model], "reference first": [reference, model, human],
              "model last": [reference, human, model],
              "re-run after import": [model, reference, human, {**reference, "note": "re-run"}, {**model, "note": "x"}]}
    store = L.LabelStore(tmp_path / "store.jsonl")
    for row in writes[order]:
        store.append([row])
    for s in (store, L.LabelStore(tmp_path / "store.jsonl")):        # in memory and read back
        cur = s.current().iloc[0]
        assert (cur["label"], cur["source"]) == ("supporting", "human")
        assert cur["conflict"]                                   # the reference disagrees: both kept, flagged


def test_the_reference_settles_a_pair_over_a_model_whatever_comes_later(tmp_path):
    store = L.LabelStore(tmp_path / "store.jsonl")
    store.append([{"query_id": "q", "unit_id": "u", "label": "sufficient", "judge": "reference", "source": "reference"}])
    store.append([{"query_id": "q", "unit_id": "u", "label": "irrelevant", "judge": "vlm", "source": "model"}])
    cur = store.current().iloc[0]
    assert (cur["label"], cur["source"], cur["adjudicated"], cur["conflict"]) == ("sufficient", "reference", True, False)


def test_your_qrels_enter_the_store_as_peoples_labels_and_win(tmp_path):
    graded = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "unit_id": ["a:1", "a:2", "b:1"], "relevance": [2, 1, 0]})
    rows = L.labels_from_qrels(graded, "mine.qrels")
    assert [r["label"] for r in rows] == ["sufficient", "supporting", "irrelevant"]
    assert {r["source"] for r in rows} == {"human"} and {r["judge"] for r in rows} == {"qrels:mine.qrels"}
    binary = graded.assign(relevance=[1, 1, 0])
    assert [r["label"] for r in L.labels_from_qrels(binary, "b.qrels")] == ["sufficient", "sufficient", "irrelevant"]
    store = L.LabelStore(tmp_path / "store.jsonl")
    store.append([{"query_id": "q1", "unit_id": "a:1", "label": "irrelevant", "judge": "answer-string",
                   "source": "model"}])
    store.append(rows)
    cur = store.current().set_index("unit_id")
    assert cur.loc["a:1", "label"] == "sufficient" and cur.loc["a:1", "judge"] == "qrels:mine.qrels"
