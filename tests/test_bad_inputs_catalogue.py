"""A catalogue of bad inputs: every one is refused by ``lookalike check`` with a message that names
the file and the row, id or key (exit 2 for parameters, 1 for a refused input), or is skipped and
named (exit 0) — and then skipped alike by stage 01's own loading, never a crash there. No case
may end in a raw traceback: ``check`` runs in this process, so any exception it lets escape fails
the case.

Each case is (name, build, exit code, words the output must hold). ``build(case)`` writes the
bad input into a small valid corpus (six page images, three questions with judgements) and
returns the parameter text to add.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from tests.conftest import broken_png, make_png, truncated_jpeg
from lookalike.cli import check
from lookalike.stages import context, stratify_corpus

UNITS = ["acme:1", "acme:2", "acme:3", "initech:1", "initech:2", "initech:3"]
COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30), (30, 200, 200), (200, 30, 200)]


class Case:
    """One case's folder: the valid corpus, helpers to break a piece of it."""

    def __init__(self, root: Path):
        self.root = root
        self.imgs = root / "imgs"
        for uid, colour in zip(UNITS, COLOURS):
            make_png(self.imgs / f"{uid.replace(':', '_')}.png", color=colour)
        self.manifest_rows = [{"unit_id": u, "image_path": f"imgs/{u.replace(':', '_')}.png"} for u in UNITS]
        self.questions = [{"query_id": f"q{i}", "text": f"What is on page {i}?", "answer": str(i)} for i in (1, 2, 3)]
        self.qrels = "q1 0 acme:1 1\nq2 0 acme:2 1\nq3 0 initech:1 1\n"

    def write(self, extra: str = "", manifest: bool = True) -> Path:
        if manifest:
            pd.DataFrame(self.manifest_rows).to_csv(self.root / "manifest.csv", index=False)
        if not (self.root / "questions.jsonl").exists():
            (self.root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in self.questions))
        if not (self.root / "qrels.txt").exists():
            (self.root / "qrels.txt").write_text(self.qrels)
        body = {"corpus": {"source": "manifest", "manifest": str(self.root / "manifest.csv"),
                           "questions": str(self.root / "questions.jsonl"), "qrels": str(self.root / "qrels.txt")},
                "validate": {"regressions": ""}}
        path = self.root / "params.yaml"
        path.write_text(_merge_yaml(body, extra))       # the valid corpus, then the case's own keys
        return path


def _merge_yaml(body: dict, extra: str) -> str:
    import yaml

    more = yaml.safe_load(extra) if extra.strip() else {}
    for key, value in (more or {}).items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return yaml.safe_dump(body, sort_keys=True)


# ----------------------------------------------------------------------------- builders

def params_only(text: str):
    return lambda c: text


def manifest_row(index: int, **change):
    def build(c: Case) -> str:
        c.manifest_rows[index].update(change)
        return ""
    return build


def manifest_image(index: int, writer, extra: str = ""):
    def build(c: Case) -> str:
        name = f"bad{index}" + (".jpg" if writer is truncated_jpeg else ".png")
        writer(c.imgs / name)
        c.manifest_rows[index]["image_path"] = f"imgs/{name}"
        return extra
    return build


def manifest_text(text: str, encoding: str = "utf-8"):
    def build(c: Case) -> str:
        (c.root / "manifest.csv").write_bytes(text.encode(encoding))
        c.manifest_rows = None
        return ""
    return build


def questions_text(text: str, suffix: str = ".jsonl", raw: bytes | None = None):
    def build(c: Case) -> str:
        path = c.root / f"questions{suffix}"
        path.write_bytes(raw if raw is not None else text.encode("utf-8"))
        return f"corpus:\n  questions: {path}\n" if suffix != ".jsonl" else ""
    return build


def qrels_text(text: str, extra: str = ""):
    def build(c: Case) -> str:
        (c.root / "qrels.txt").write_bytes(text.encode("utf-8"))
        return extra
    return build


def external_run(text: str | None):
    def build(c: Case) -> str:
        path = c.root / "mine.run"
        if text is not None:
            path.write_text(text)
        return f"retrieve:\n  external_runs: ['mine={path}']\n"
    return build


def human_labels(text: str):
    def build(c: Case) -> str:
        (c.root / "labels.csv").write_text(text)
        return f"validate:\n  regressions: ''\n  labels: {c.root / 'labels.csv'}\n"
    return build


def image_folder(mutate):
    def build(c: Case) -> str:
        folder = c.root / "folder"
        shutil.copytree(c.imgs, folder)
        mutate(c, folder)
        return f"corpus:\n  source: images\n  root: {folder}\n  manifest: ''\n  questions: ''\n  qrels: ''\n"
    return build


def pdf_folder(mutate, extra: str = ""):
    def build(c: Case) -> str:
        folder = c.root / "pdfs"
        folder.mkdir()
        Image.new("RGB", (200, 260), "white").save(folder / "report.pdf", save_all=True,
                                                   append_images=[Image.new("RGB", (200, 260), "grey")])
        mutate(c, folder)
        return (f"corpus:\n  source: pdf\n  root: {folder}\n  manifest: ''\n  questions: ''\n  qrels: ''\n" + extra)
    return build


def beir_folder(qrels_tsv: str):
    def build(c: Case) -> str:
        folder = c.root / "beir"
        (folder / "qrels").mkdir(parents=True)
        shutil.copy(c.imgs / "acme_1.png", folder / "p.png")
        (folder / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "image_path": "p.png"}) + "\n")
        (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "what?"}) + "\n")
        (folder / "qrels" / "test.tsv").write_text(qrels_tsv)
        return f"corpus:\n  source: beir\n  root: {folder}\n  manifest: ''\n  questions: ''\n  qrels: ''\n"
    return build


def _symlink_out(c: Case, folder: Path) -> None:
    outside = make_png(c.root / "elsewhere" / "secret.png")
    (folder / "link.png").symlink_to(outside)


def _broken_in_folder(c: Case, folder: Path) -> None:
    broken_png(folder / "broken.png")


def _truncated_in_folder(c: Case, folder: Path) -> None:
    truncated_jpeg(folder / "cut.jpg")


def _empty_folder(c: Case, folder: Path) -> None:
    for p in folder.iterdir():
        p.unlink()


def _huge_pdf_page(c: Case, folder: Path) -> None:
    Image.new("RGB", (200, 200), "white").save(folder / "poster.pdf", resolution=1.0)


def _corrupt_pdf(c: Case, folder: Path) -> None:
    (folder / "torn.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf body")


def _nothing(c: Case, folder: Path) -> None:
    pass


OK, REFUSED, BAD = 0, 1, 2
Q_OK = json.dumps({"query_id": "q1", "text": "What is on page 1?"}) + "\n"

CASES = [
    # --- parameters (exit 2, the key named)
    ("run name empty", params_only("run: ''\n"), BAD, ["key 'run'"]),
    ("run name climbs out", params_only("run: ../../../x\n"), BAD, ["key 'run'"]),
    ("run name a path", params_only("run: a/b\n"), BAD, ["key 'run'"]),
    ("run name dot", params_only("run: '.'\n"), BAD, ["key 'run'"]),
    ("no encoders", params_only("encode:\n  encoders: []\n"), BAD, ["key 'encode.encoders'", "at least one"]),
    ("haystack fraction text", params_only("report:\n  haystack_fractions: [a]\n"), BAD,
     ["key 'report.haystack_fractions'", "entry 1"]),
    ("haystack fraction zero", params_only("report:\n  haystack_fractions: [0, 1.0]\n"), BAD,
     ["key 'report.haystack_fractions'", "entry 1"]),
    ("haystack fraction above one", params_only("report:\n  haystack_fractions: [0.5, 1.5]\n"), BAD,
     ["key 'report.haystack_fractions'", "entry 2"]),
    ("mining window text", params_only("mining:\n  windows: [abc]\n"), BAD, ["key 'mining.windows'", "entry 1"]),
    ("mining window backwards", params_only("mining:\n  windows: ['20-4']\n"), BAD, ["key 'mining.windows'", "entry 1"]),
    ("mining alpha out of range", params_only("mining:\n  alphas: [2, -1]\n"), BAD, ["key 'mining.alphas'", "entry 1"]),
    ("mining alpha text", params_only("mining:\n  alphas: [x]\n"), BAD, ["key 'mining.alphas'"]),
    ("external run without name", params_only("retrieve:\n  external_runs: [x.run]\n"), BAD,
     ["key 'retrieve.external_runs'", "entry 1"]),
    ("unknown key", params_only("corpus:\n  sauce: demo\n"), BAD, ["unknown key 'corpus.sauce'"]),
    ("negative seed", params_only("seed: -1\n"), BAD, ["key 'seed'"]),
    ("page base two", params_only("corpus:\n  page_base: 2\n"), BAD, ["key 'corpus.page_base'"]),
    ("dpi too low", params_only("corpus:\n  dpi: 5\n"), BAD, ["key 'corpus.dpi'"]),
    ("judge timeout zero", params_only("judges:\n  timeout_s: 0\n"), BAD, ["key 'judges.timeout_s'"]),
    ("unknown source", params_only("corpus:\n  source: zip\n"), BAD, ["key 'corpus.source'"]),
    ("device typo", params_only("encode:\n  device: gpu\n"), BAD, ["key 'encode.device'"]),
    ("cluster typo", params_only("stats:\n  cluster: x\n"), BAD, ["key 'stats.cluster'"]),
    ("wrong type", params_only("retrieve:\n  depth: deep\n"), BAD, ["key 'retrieve.depth'"]),
    ("encoders not a list", params_only("encode:\n  encoders: ocr-minilm\n"), BAD, ["key 'encode.encoders'"]),
    # --- the manifest (rows skipped and named, or the file refused)
    ("unit id with a space", manifest_row(0, unit_id="acme 2023:1"), OK, ["'acme 2023:1'", "whitespace", "row 1"]),
    ("image path leaves root", manifest_row(1, image_path="../../outside.png"), OK, ["leaves the corpus root", "row 2"]),
    ("image missing", manifest_row(2, image_path="imgs/none.png"), OK, ["not found", "row 3"]),
    ("duplicate unit id", manifest_row(3, unit_id="acme:1"), OK, ["duplicate unit_id", "row 4"]),
    ("page not a number", manifest_row(4, unit_id="initech:x"), OK, ["not a 1-based page", "row 5"]),
    ("page zero", manifest_row(4, unit_id="initech:0"), OK, ["not a 1-based page", "row 5"]),
    ("unknown content type", manifest_row(5, content_type="diagramme"), OK, ["unknown content_type", "row 6"]),
    ("bad revision", manifest_row(5, revision="abc"), OK, ["revision", "row 6"]),
    ("broken png stream", manifest_image(0, broken_png), OK, ["not a readable image", "row 1", "'acme:1'"]),
    ("truncated jpeg", manifest_image(1, truncated_jpeg), OK, ["not a readable image", "row 2", "'acme:2'"]),
    ("not an image", manifest_image(2, lambda p: p.write_bytes(b"hello")), OK, ["not a readable image", "row 3"]),
    ("image over max_pixels", manifest_image(0, lambda p: make_png(p, size=(400, 300)), "corpus:\n  max_pixels: 100000\n"),
     OK, ["over the limit of 100000", "row 1"]),
    ("every image skipped", params_only("corpus:\n  max_pixels: 100\n"), REFUSED,
     ["no unit is left", "over the limit of 100"]),
    ("manifest header only", manifest_text("unit_id,image_path\n"), REFUSED, ["manifest.csv", "no rows"]),
    ("manifest without image_path", manifest_text("unit_id\nacme:1\n"), REFUSED, ["manifest.csv", "'image_path'"]),
    ("manifest not utf-8", manifest_text("unit_id,image_path\nacmé:1,x.png\n", "latin-1"), REFUSED,
     ["manifest.csv", "UTF-8"]),
    ("manifest empty file", manifest_text(""), REFUSED, ["manifest.csv"]),
    # --- image folders
    ("symlink out of the root", image_folder(_symlink_out), OK, ["outside the corpus root", "link"]),
    ("broken png in a folder", image_folder(_broken_in_folder), OK, ["not a readable image", "broken"]),
    ("truncated jpeg in a folder", image_folder(_truncated_in_folder), OK, ["not a readable image", "cut"]),
    ("empty image folder", image_folder(_empty_folder), REFUSED, ["folder", "no image files"]),
    # --- PDF folders
    ("huge pdf page", pdf_folder(_huge_pdf_page), OK, ["200 x 200 inches", "corpus.max_pixels", "poster"]),
    ("corrupt pdf", pdf_folder(_corrupt_pdf), OK, ["unreadable or corrupt", "torn"]),
    ("name pattern not a regex", pdf_folder(_nothing, "  name_pattern: '(?P<entity'\n"), REFUSED,
     ["corpus.name_pattern", "not a regular expression"]),
    ("name pattern unknown group", pdf_folder(_nothing, "  name_pattern: '(?P<colour>\\w+)'\n"), REFUSED,
     ["corpus.name_pattern", "colour"]),
    ("pages backwards", pdf_folder(_nothing, "  pages: '3-1'\n"), REFUSED, ["corpus.pages", "'3-1'"]),
    # --- BEIR folders
    ("beir score not a number", beir_folder("query-id\tcorpus-id\tscore\nq1\td1\tabc\n"), REFUSED,
     ["qrels/test.tsv", "row 1", "'abc'"]),
    ("beir unknown corpus id", beir_folder("query-id\tcorpus-id\tscore\nq1\tzz\t1\n"), OK, ["unknown or skipped corpus id",
                                                                                           "'zz'"]),
    # --- questions
    ("questions line not an object", questions_text(Q_OK + "[1, 2]\n"), REFUSED, ["questions.jsonl", "line 2",
                                                                                "expected an object"]),
    ("questions line not json", questions_text(Q_OK + "{oops\n"), REFUSED, ["questions.jsonl", "line 2", "not JSON"]),
    ("question without text", questions_text(Q_OK + json.dumps({"query_id": "q2"}) + "\n"), OK,
     ["question text", "row 2"]),
    ("question with null id", questions_text(Q_OK + json.dumps({"query_id": None, "text": "Who?"}) + "\n"), OK,
     ["'query_id'", "row 2"]),
    ("question text a list", questions_text(Q_OK + json.dumps({"query_id": "q2", "text": ["a"]}) + "\n"), OK,
     ["holds a JSON list", "row 2"]),
    ("question id with a space", questions_text(Q_OK + json.dumps({"query_id": "q 2", "text": "Who?"}) + "\n"), OK,
     ["contains whitespace", "row 2"]),
    ("question id twice", questions_text(Q_OK + Q_OK), OK, ["duplicate query_id", "row 2"]),
    ("questions empty file", questions_text(""), REFUSED, ["questions.jsonl", "no questions"]),
    ("questions not utf-8", questions_text("", raw='{"query_id": "q1", "text": "é"}\n'.encode("latin-1")), REFUSED,
     ["questions.jsonl", "UTF-8"]),
    ("questions csv without text", questions_text("query_id,question\nq1,hi\n", ".csv"), REFUSED,
     ["questions.csv", "no question text column"]),
    ("questions csv header only", questions_text("query_id,text\n", ".csv"), REFUSED, ["questions.csv", "no questions"]),
    # --- qrels
    ("relevance beyond 64 bits", qrels_text("q1 0 acme:1 99999999999999999999\nq2 0 acme:2 1\n"), OK,
     ["64-bit", "row 1"]),
    ("relevance text", qrels_text("q1 0 acme:1 abc\nq2 0 acme:2 1\n"), OK, ["relevance", "'abc'"]),
    ("qrels unknown unit", qrels_text("q1 0 acme:9 1\nq2 0 acme:2 1\n"), OK, ["unknown unit", "'acme:9'"]),
    ("qrels unknown query", qrels_text("q1 0 acme:1 1\nq7 0 acme:2 1\n"), OK, ["unknown query", "row 2"]),
    ("qrels line too short", qrels_text("q1 0 acme:1\n"), REFUSED, ["qrels.txt", "line 1"]),
    ("qrels pair twice", qrels_text("q1 0 acme:1 1\nq1 0 acme:1 0\n"), OK, ["judged twice", "row 2"]),
    ("qrels zero-based declared one-based", qrels_text("q1 0 acme:0 1\nq2 0 acme:1 1\nq3 0 initech:0 1\n"), REFUSED,
     ["qrels.txt", "page base"]),
    ("qrels with bom and crlf", qrels_text("\ufeffq1 0 acme:1 1\r\nq2 0 acme:2 1\r\n"), OK, ["2 rows read, 0 skipped"]),
    # --- external runs
    ("external run missing", external_run(None), REFUSED, ["mine.run", "not found"]),
    ("external run score text", external_run("q1 Q0 acme:1 1 high mine\n"), REFUSED, ["mine.run", ":1", "'high'"]),
    ("external run unit twice", external_run("q1 Q0 acme:1 1 2.0 m\nq1 Q0 acme:1 2 1.0 m\n"), REFUSED,
     ["mine.run", ":2", "twice"]),
    ("external run unknown unit", external_run("q1 Q0 acme:1 1 2.0 m\nq1 Q0 zz:1 2 1.0 m\n"), OK,
     ["unknown unit", "'zz:1'"]),
    ("external run short line", external_run("q1 Q0 acme:1 1\n"), REFUSED, ["mine.run", ":1", "6 fields"]),
    # --- people's labels
    ("labels conflict", human_labels("query_id,unit_id,label\nq1,acme:1,sufficient\nq1,acme:1,irrelevant\n"), OK,
     ["conflicting labels", "row 1: sufficient, row 2: irrelevant"]),
    ("labels unknown unit", human_labels("query_id,unit_id,label\nq1,zz:1,sufficient\n"), OK, ["unknown unit 'zz:1'"]),
    ("labels unknown query", human_labels("query_id,unit_id,label\nq9,acme:1,sufficient\n"), OK, ["unknown query 'q9'"]),
    ("labels bad label", human_labels("query_id,unit_id,label\nq1,acme:1,maybe\n"), REFUSED, ["labels.csv", "'maybe'"]),
    ("labels missing column", human_labels("query_id,unit_id\nq1,acme:1\n"), REFUSED, ["labels.csv", "label"]),
    # --- a run name the file system cannot hold: check refuses it as run does (not an OSError in a probe)
    ("run name too long", params_only("run: " + "r" * 300 + "\n"), BAD, ["key 'run'", "at most 100 characters"]),
]


def test_the_catalogue_has_every_class_and_every_case_it_ever_held():
    # the input cases, then the cases on the surfaces added after them (SURFACES, below)
    assert len(CASES) >= 81 and len(SURFACES) >= 21 and len(CASES) + len(SURFACES) >= 101
    assert len({name for name, *_ in CASES}) == len(CASES)
    assert len({name for name, _ in SURFACES}) == len(SURFACES)


@pytest.mark.parametrize("name, build, code, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, capsys, name, build, code, words):
    case = Case(tmp_path)
    extra = build(case)
    params = case.write(extra, manifest=case.manifest_rows is not None)
    got = check.main([str(params)])                      # an exception escaping here is a raw traceback
    out = capsys.readouterr().out
    assert "Traceback" not in out
    assert got == code, out
    for word in words:
        assert word in out, f"{word!r} not in:\n{out}"
    if code == OK:
        # what check skipped, stage 01's own loading skips alike, and renders the rest
        assert "skipped ×" in out or "0 skipped" in out, out
        from lookalike import params as P

        prm = P.load_params(params)
        corpus = stratify_corpus.load_corpus(context(tmp_path / "run", prm))
        assert len(corpus.units) >= 1


# ============================================================================= the surfaces
# Cases on the commands and services beside `check`: the example writer, the label server, the
# Python API, `lookalike eval`, the parameter loader and `lookalike audit`. Each is one function that
# does what a user (or a client) did and asserts what must hold: a clear refusal in words, never a
# traceback or a 500, and nothing a user wrote overwritten.

SURFACES: list[tuple[str, object]] = []


def surface(name: str):
    def register(fn):
        SURFACES.append((name, fn))
        return fn
    return register


def _cli(capsys, *argv: str) -> tuple[int, str]:
    from lookalike.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:           # argparse's own refusals
        code = exc.code
    got = capsys.readouterr()
    return code, got.out + got.err


# ----------------------------------------------------------------------------- lookalike example

@surface("example over a user's questions and qrels")
def _example_keeps_users_files(tmp_path, capsys):
    mine = {"questions.jsonl": '{"query_id": "mine", "text": "my own question"}\n', "qrels.txt": "mine 0 x:1 1\n",
            "meta.csv": "unit_id,caption\nx:1,mine\n"}
    for name, text in mine.items():
        (tmp_path / name).write_text(text)
    code, out = _cli(capsys, "example", "documents", str(tmp_path))
    assert code == 2 and "Traceback" not in out
    assert "questions.jsonl" in out and "qrels.txt" in out and "meta.csv" in out and "nothing was written" in out
    assert {n: (tmp_path / n).read_text() for n in mine} == mine
    assert not (tmp_path / "pdfs").exists()


@surface("example over a user's photos")
def _example_keeps_users_photos(tmp_path, capsys):
    (tmp_path / "photos").mkdir()
    make_png(tmp_path / "photos" / "photo000.jpg")
    before = (tmp_path / "photos" / "photo000.jpg").read_bytes()
    code, out = _cli(capsys, "example", "photos", str(tmp_path))
    assert code == 2 and "photos/photo000.jpg" in out and "Traceback" not in out
    assert (tmp_path / "photos" / "photo000.jpg").read_bytes() == before
    assert not (tmp_path / "questions.jsonl").exists()


@surface("example --force lists what it replaces; again into its own files needs no force")
def _example_force_and_rerun(tmp_path, capsys):
    (tmp_path / "qrels.txt").write_text("mine 0 x:1 1\n")
    (tmp_path / "notes.txt").write_text("not the example's")
    code, out = _cli(capsys, "example", "photos", str(tmp_path), "--force")
    assert code == 0 and "replacing 1 file(s)" in out and "qrels.txt" in out
    assert (tmp_path / "notes.txt").read_text() == "not the example's"      # not the example's name: untouched
    code, out = _cli(capsys, "example", "photos", str(tmp_path))          # its own unchanged files: replaced
    assert code == 0, out
    (tmp_path / "questions.jsonl").write_text("edited by the user\n")      # then the user edits one
    code, out = _cli(capsys, "example", "photos", str(tmp_path))
    assert code == 2 and "questions.jsonl" in out
    assert (tmp_path / "questions.jsonl").read_text() == "edited by the user\n"


@surface("example into a path that is a file")
def _example_into_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    code, out = _cli(capsys, "example", "documents", str(tmp_path / "afile"))
    assert code == 2 and "is a file" in out and "Traceback" not in out
    assert (tmp_path / "afile").read_text() == "x"


@surface("example into a folder that cannot be written")
def _example_unwritable(tmp_path, capsys):
    # /proc refuses new folders to everyone, root included (a chmod would not stop root)
    code, out = _cli(capsys, "example", "photos", "/proc/lookalike-example")
    assert code == 2 and "cannot write into /proc/lookalike-example" in out and "Traceback" not in out


@surface("example with a negative seed")
def _example_negative_seed(tmp_path, capsys):
    code, out = _cli(capsys, "example", "photos", str(tmp_path / "x"), "--seed", "-1")
    assert code == 2 and "--seed must be" in out and "Traceback" not in out
    assert not (tmp_path / "x").exists()


@surface("run --out onto a folder of the user's named like the run")
def _run_into_a_users_folder(tmp_path, capsys):
    from lookalike.cli import run

    (tmp_path / "ci").mkdir()                              # the ci run's folder name, holding someone's page
    (tmp_path / "ci" / "index.html").write_text("<p>my own page</p>")
    code = run.main(str(Path(__file__).resolve().parents[1] / "params" / "ci.yaml"), str(tmp_path), None)
    out = capsys.readouterr().err
    assert code == 2 and "not a lookalike run" in out and "nothing was written" in out
    assert sorted(p.name for p in (tmp_path / "ci").iterdir()) == ["index.html"]
    assert (tmp_path / "ci" / "index.html").read_text() == "<p>my own page</p>"


# ----------------------------------------------------------------------------- the label server

def _label_client(tmp_path, questions: int = 2, per_question: int = 2, **settings):
    from starlette.testclient import TestClient

    from tests.conftest import make_label_run
    from lookalike.judging import server
    from lookalike.judging.labeldb import LabelDB

    run_dir = make_label_run(tmp_path / "run", questions=questions, per_question=per_question)
    db = LabelDB(run_dir / "labels" / "labels.sqlite")
    app = server.create_app(server.load_run(run_dir), db, server.Settings(**settings))
    return TestClient(app, raise_server_exceptions=False), db, run_dir


@surface("label server: a deeply nested JSON body")
def _server_nested_body(tmp_path, capsys):
    c, _, _ = _label_client(tmp_path)
    for depth in (30_000, 20):                    # past Python's recursion limit, and past the server's own
        r = c.post("/api/signin", content=b"[" * depth + b"]" * depth, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "nests" in r.json()["error"], r.text


@surface("label server: a body over the size limit")
def _server_big_body(tmp_path, capsys):
    from lookalike.judging import server

    c, _, _ = _label_client(tmp_path)
    r = c.post("/api/signin", content=b'{"name": "' + b"a" * (server.MAX_BODY + 10) + b'"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "at most" in r.json()["error"]


@surface("label server: a non-ASCII token")
def _server_unicode_token(tmp_path, capsys):
    from urllib.parse import quote

    c, db, _ = _label_client(tmp_path)
    _, token = db.add_person("ann", "blind")
    for wrong in ("sécret-日本", quote("sécret-日本"), token + "é"):
        r = c.post("/api/signin", json={"token": wrong})
        assert r.status_code == 401 and "not known" in r.json()["error"], r.text
        r = c.get("/api/next", headers={"Authorization": f"Bearer {wrong}".encode()})   # raw, as curl sends
        assert r.status_code == 401, r.text
    assert c.post("/api/signin", json={"token": token}).status_code == 200


@surface("label server: a label on a pair leased to someone else")
def _server_leased_elsewhere(tmp_path, capsys):
    from lookalike.judging.labeldb import LabelDBError

    _, db, _ = _label_client(tmp_path, questions=1, per_question=1)      # one pair
    db.add_person("a", "blind")
    db.add_person("b", "blind")
    mine = db.next_pair("a", 1, -1, 0, False)           # a's lease has run out while a still labels
    theirs = db.next_pair("b", 1, 600, 0, False)         # ... and the pair went to b
    assert theirs.pair_id == mine.pair_id
    with pytest.raises(LabelDBError, match="leased to someone else") as err:
        db.submit("a", mine.pair_id, "sufficient", "", "late-label-0001", 1, False)
    assert err.value.status == 409
    db.submit("b", theirs.pair_id, "irrelevant", "", "b-label-00001", 1, False)
    assert len(db.labels()) == 1


@surface("label server: a read-only database")
def _server_read_only_db(tmp_path, capsys):
    import sqlite3

    from lookalike.judging.labeldb import LabelDB, LabelDBError

    path = tmp_path / "labels.sqlite"
    LabelDB(path)

    class ReadOnly(LabelDB):         # a read-only mount (chmod does not stop root, which CI may be)
        def _connect(self):
            return sqlite3.connect(f"file:{self.target}?mode=ro", uri=True, isolation_level=None)

    with pytest.raises(LabelDBError, match="read-only"):
        ReadOnly(path)


@surface("label server: --db below a file, or at a user's file")
def _server_db_paths(tmp_path, capsys):
    from tests.conftest import make_label_run

    run_dir = make_label_run(tmp_path / "run", questions=2, per_question=2)
    (tmp_path / "notes.txt").write_text("x")                 # short: SQLite would make it a database
    for db, words in ((tmp_path / "notes.txt" / "labels.sqlite", "cannot make the database's folder"),
                      (tmp_path / "notes.txt", "not a lookalike label database"),
                      (tmp_path, "is a folder")):
        code, out = _cli(capsys, "labels", "serve", str(run_dir), "--db", str(db))
        assert code == 2 and words in out and "Traceback" not in out, out
    assert (tmp_path / "notes.txt").read_text() == "x"


# ----------------------------------------------------------------------------- the Python API

def _trec_files(tmp_path):
    (tmp_path / "q.txt").write_text("q1 0 a:1 1\nq2 0 b:1 1\n")
    (tmp_path / "r.txt").write_text("q1 Q0 a:1 1 2.0 r\nq1 Q0 b:1 2 1.0 r\nq2 Q0 a:1 1 2.0 r\nq2 Q0 b:1 2 1.0 r\n")
    return tmp_path / "q.txt", tmp_path / "r.txt"


@surface("api: evaluate with paths")
def _api_paths(tmp_path, capsys):
    import lookalike

    q, r = _trec_files(tmp_path)
    got = lookalike.evaluate(str(q), str(r), ["map"]).mean()
    assert got["map"] == pytest.approx(0.75)
    assert lookalike.evaluate(q, r, "map").mean()["map"] == pytest.approx(0.75)      # Path objects, one name


@surface("api: evaluate with None")
def _api_none(tmp_path, capsys):
    import lookalike

    q, r = _trec_files(tmp_path)
    with pytest.raises(TypeError, match=r"^qrels: expected Qrels, a path"):
        lookalike.evaluate(None, str(r), ["map"])
    with pytest.raises(TypeError, match=r"^run: expected a Run, a path"):
        lookalike.evaluate(str(q), 42, ["map"])


@surface("api: compare with n_boot 0")
def _api_n_boot(tmp_path, capsys):
    import lookalike

    q, r = _trec_files(tmp_path)
    for kwargs, name in (({"n_boot": 0}, "n_boot"), ({"n_perm": 5}, "n_perm")):
        with pytest.raises(ValueError, match=rf"^{name} must be at least 200"):
            lookalike.compare(str(q), {"a": str(r), "b": str(r)}, ["map"], **kwargs)


@surface("api: compare with runs None")
def _api_runs_none(tmp_path, capsys):
    import lookalike

    q, _ = _trec_files(tmp_path)
    with pytest.raises(TypeError, match=r"^runs: expected a mapping"):
        lookalike.compare(str(q), None, ["map"])
    with pytest.raises(TypeError, match=r"runs\[1\]: expected a Run"):
        lookalike.compare(str(q), [str(tmp_path / "r.txt"), 3.5], ["map"])


@surface("api: evaluate over no shared query")
def _api_no_shared_queries(tmp_path, capsys):
    import math

    import lookalike
    from lookalike.eval.metrics import EmptyEvaluation

    q, _ = _trec_files(tmp_path)
    (tmp_path / "other.run").write_text("z9 Q0 a:1 1 1.0 r\n")
    ev = lookalike.evaluate(str(q), str(tmp_path / "other.run"), ["map", "num_q"])
    with pytest.warns(EmptyEvaluation, match=r"share no query id \(qrels: q1, q2; run: z9\)"):
        mean = ev.mean()
    assert math.isnan(mean["map"]) and mean["num_q"] == 0


# ----------------------------------------------------------------------------- lookalike eval

@surface("eval --ci with one bootstrap resample")
def _eval_one_resample(tmp_path, capsys):
    q, r = _trec_files(tmp_path)
    for argv in (["eval", "--ci", "--n-boot", "1", str(q), str(r)], ["eval", "--n-boot", "1", str(q), str(r), str(r)]):
        code, out = _cli(capsys, *argv)
        assert code == 2 and "--n-boot must be at least 200" in out and "95%" not in out.split("error:")[0]


@surface("eval over no shared query")
def _eval_no_shared_queries(tmp_path, capsys):
    q, _ = _trec_files(tmp_path)
    (tmp_path / "other.run").write_text("z9 Q0 a:1 1 1.0 r\n")
    code, out = _cli(capsys, "eval", str(q), str(tmp_path / "other.run"))
    assert code == 2 and "share no query id" in out and "0.0000" not in out


# ----------------------------------------------------------------------------- parameters

@surface("params: a YAML alias bomb")
def _params_alias_bomb(tmp_path, capsys):
    import time

    lines = ["encode:", "  settings:", '    l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"    l{i}: &l{i} [{', '.join(['*l' + str(i - 1)] * 9)}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    started = time.perf_counter()
    code, out = _cli(capsys, "check", str(path))
    assert code == 2 and "alias *l0" in out and "line 4" in out and "Traceback" not in out
    assert time.perf_counter() - started < 30
    from lookalike import params as P

    with pytest.raises(P.ParamsError, match="aliases"):         # run loads the same way
        P.load_params(path)


# ----------------------------------------------------------------------------- lookalike audit

def _audit(capsys, run_dir) -> tuple[int, str]:
    from lookalike.cli import audit

    code = audit.main([str(run_dir)])
    got = capsys.readouterr()
    return code, got.out + got.err


def _bare_run(root: Path) -> Path:
    for sub in ("runs", "runs_validated", "qrels", "tables"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "index.html").write_text("<p>run</p>")
    (root / "summary.html").write_text("<p>summary</p>")
    (root / "manifest.json").write_text(json.dumps({"params": {"corpus": {"source": "manifest"}}}))
    return root


@surface("audit: a run file with a non-numeric rank")
def _audit_bad_rank(tmp_path, capsys):
    run = _bare_run(tmp_path / "r")
    (run / "runs" / "sys.run").write_text("q1 Q0 a:1 1 2.0 sys\nq1 Q0 b:1 two 1.0 sys\n")
    code, out = _audit(capsys, run)
    assert code == 1 and "runs/sys.run" in out and "line 2: rank 'two' is not a whole number" in out
    assert "Traceback" not in out


@surface("audit: a qrels line of three fields")
def _audit_short_qrels(tmp_path, capsys):
    run = _bare_run(tmp_path / "r")
    pd.DataFrame([{"unit_id": "a:1"}]).to_csv(run / "tables" / "units.csv", index=False)
    pd.DataFrame([{"system": "sys", "measure": "ndcg_cut_10", "corpus_size": 1, "extrapolated": False,
                   "value": 1.0}]).to_csv(run / "tables" / "haystack_curve.csv", index=False)
    (run / "qrels" / "evidence_validated.qrels").write_text("q1 0 a:1 1\nq2 0 a:1\n")
    code, out = _audit(capsys, run)
    assert code == 1 and "readable: qrels/evidence_validated.qrels" in out and "2: expected 4 fields" in out
    assert "Traceback" not in out


@surface("audit: a manifest that is not JSON")
def _audit_bad_manifest(tmp_path, capsys):
    run = _bare_run(tmp_path / "r")
    (run / "manifest.json").write_text("{not json")
    code, out = _audit(capsys, run)
    assert code == 1 and "readable: manifest.json" in out and "not JSON" in out and "Traceback" not in out


@pytest.mark.parametrize("name, case", SURFACES, ids=[name for name, _ in SURFACES])
def test_surface(tmp_path, capsys, name, case):
    case(tmp_path, capsys)
