"""Judges: answer-string number normalisation, human labels, the OpenAI-compatible client against a
local server that speaks the protocol (success, malformed reply, timeout then retry), kappa."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from lookalike.judging import judges
from lookalike.report.summary import kappa_words
from PIL import Image


@pytest.mark.parametrize("text, expected", [
    ("Revenue $1,234M", [1.234e9]),
    ("$-59M and (12.5)", [-59e6, -12.5]),
    ("+9.1% growth, 9,620 staff", [9.1, 9620.0]),
    ("1.5bn", [1.5e9]),
])
def test_number_normalisation(text, expected):
    assert judges.normalise_numbers(text) == pytest.approx(expected)


def test_answer_string_judge():
    judge = judges.AnswerStringJudge()
    q = {"text": "What was Corvane Systems' operating income in Q1 FY2024?", "answer": "$183M"}
    page = {"text": "Key figures Operating income $183M $167M Corvane Systems"}
    assert judge.judge(q, page).label == "sufficient"
    other = {"text": "Key figures Operating income $190M Corvane Systems Q1 FY2024"}
    assert judge.judge(q, other).label == "supporting"
    assert judge.judge(q, {"text": "Risk factors Demand may decline"}).label == "irrelevant"
    assert judges.answer_in_text("183 million", "operating income $183M", "What was the operating income?")  # scale words agree
    assert judges.answer_in_text("Devices, $437M", "Cloud $216M Devices $437M")
    assert not judges.answer_in_text("$-59M", "Capital expenditure $59M", "What was the capital expenditure?")  # signs matter


def test_answer_string_needs_the_answers_words_not_only_its_numbers():
    """A casino operator's earnings page printing the same figure does not answer a beverage
    company's question; a bare number matches only beside the question's words; N/A never matches."""
    judge = judges.AnswerStringJudge()
    q = {"text": "What was Fizzco Beverages' net revenue in 2022?", "answer": "$2,310 million net revenue"}
    casino = {"text": "Lucky Star Casinos: gaming revenue 2,310 million in 2022"}
    assert judge.judge(q, casino).label != "sufficient"                  # the old rule said sufficient (numbers only)
    right = {"text": "Fizzco Beverages 2022: net revenue $2,310 million"}
    got = judge.judge(q, right)
    assert got.label == "sufficient" and "2,310,000,000" in got.rationale and "net" in got.rationale
    bare = {"text": "How many plants did Fizzco Beverages open in 2022?", "answer": "2"}
    assert judge.judge(bare, {"text": "Table 2: weather in Oslo, page 6 of 9"}).label != "sufficient"
    assert judge.judge(bare, {"text": "Fizzco Beverages opened 2 plants in 2022"}).label == "sufficient"
    assert not judges.answer_in_text("N/A", "N/A appears here, and so does everything else")
    assert not judges.answer_in_text("", "anything")


def test_human_labels(tmp_path):
    (tmp_path / "labels.csv").write_text("query_id,unit_id,label,note\nq1,u1,supporting,partial table\n")
    judge = judges.HumanJudge(tmp_path / "labels.csv")
    got = judge.judge({"query_id": "q1"}, {"unit_id": "u1"})
    assert (got.label, got.rationale, got.judge) == ("supporting", "partial table", "human")
    with pytest.raises(judges.JudgeError, match="no human label"):
        judge.judge({"query_id": "q2"}, {"unit_id": "u1"})
    (tmp_path / "bad.csv").write_text("query_id,unit_id,label\nq1,u1,maybe\n")
    with pytest.raises(judges.JudgeError, match="bad.csv: row 1 label 'maybe'"):
        judges.HumanJudge(tmp_path / "bad.csv")


class _Server:
    """A local chat-completions server whose replies the test scripts, one per request."""

    def __init__(self, replies):
        self.replies, self.requests = list(replies), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"body": body, "auth": self.headers.get("Authorization")})
                kind, content = outer.replies.pop(0) if outer.replies else ("ok", "{}")
                if kind == "sleep":
                    time.sleep(content)
                    content = '{"label": "irrelevant", "rationale": "late"}'
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.httpd.shutdown()


@pytest.fixture
def page(tmp_path):
    path = tmp_path / "page.png"
    Image.new("RGB", (40, 20), (10, 120, 200)).save(path)
    return {"unit_id": "u1", "image_path": str(path)}


def test_openai_compatible_success_with_cache_and_key_from_env(tmp_path, page, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test-secret")
    srv = _Server([("ok", '```json\n{"label": "sufficient", "rationale": "the table shows it"}\n```')])
    with srv as url:
        judge = judges.OpenAICompatibleJudge(url, "tiny-vlm", api_key_env="MY_JUDGE_KEY", cache_dir=tmp_path / "cache",
                                        retries=0)
        got = judge.judge({"text": "What was revenue?"}, page)
        again = judge.judge({"text": "What was revenue?"}, page)
    assert (got.label, got.rationale) == ("sufficient", "the table shows it [1 sample at temperature 0]") and again == got
    assert len(srv.requests) == 1 and srv.requests[0]["auth"] == "Bearer sk-test-secret"   # second came from cache
    cached = list((tmp_path / "cache").iterdir())
    assert len(cached) == 1 and "sk-test-secret" not in cached[0].read_text()


def test_openai_compatible_request_shape(page):
    srv = _Server([("ok", '{"label": "irrelevant", "rationale": "no"}')])
    with srv as url:
        judges.OpenAICompatibleJudge(url, "tiny-vlm", retries=0).judge({"text": "Q?"}, page)
    body = srv.requests[0]["body"]
    assert body["model"] == "tiny-vlm" and body["messages"][0]["content"] == judges.RUBRIC
    image_part = body["messages"][1]["content"][1]
    assert image_part["image_url"]["url"].startswith("data:image/png;base64,")
    assert srv.requests[0]["auth"] is None          # no key in the environment, none sent


def test_openai_compatible_malformed_reply_is_retried_then_fails(page):
    srv = _Server([("ok", "Sure! It is sufficient."), ("ok", '{"label": "relevant"}'), ("ok", "not json")])
    with srv as url:
        judge = judges.OpenAICompatibleJudge(url, "tiny-vlm", retries=2, backoff=0.01)
        with pytest.raises(judges.JudgeError, match="no valid judgement after 3 attempts"):
            judge.judge({"text": "Q?"}, page)
    assert len(srv.requests) == 3


def test_openai_compatible_timeout_then_retry_succeeds(page):
    srv = _Server([("sleep", 1.0), ("ok", '{"label": "supporting", "rationale": "part"}')])
    with srv as url:
        judge = judges.OpenAICompatibleJudge(url, "tiny-vlm", timeout=0.3, retries=1, backoff=0.01)
        got = judge.judge({"text": "Q?"}, page)
    assert got.label == "supporting" and len(srv.requests) == 2


def test_kappa_and_confusion():
    a = ["sufficient", "supporting", "irrelevant", "irrelevant", "sufficient", "supporting"]
    assert judges.cohen_kappa(a, a) == pytest.approx(1.0)
    b = ["sufficient", "sufficient", "irrelevant", "supporting", "sufficient", "supporting"]
    cm = judges.confusion(a, b)
    assert cm.loc["supporting", "sufficient"] == 1 and cm.to_numpy().sum() == 6
    po = 4 / 6
    pe = (2 * 3 + 2 * 2 + 2 * 1) / 36
    assert judges.cohen_kappa(a, b) == pytest.approx((po - pe) / (1 - pe))
    # boundary: only items both call relevant — (suff,suff), (supp,suff), (suff,suff), (supp,supp)
    assert judges.boundary_kappa(a, b) == pytest.approx(judges.cohen_kappa(
        ["sufficient", "supporting", "sufficient", "supporting"], ["sufficient", "sufficient", "sufficient", "supporting"],
        labels=("sufficient", "supporting")))


def test_registry_holds_every_judge_with_its_capabilities():
    assert set(judges.REGISTRY) == {"reference", "answer-string", "human", "openai-compatible"}
    caps = {n: s.capabilities for n, s in judges.REGISTRY.items()}
    assert caps["reference"].needs_answer_key and caps["reference"].judges_sets and caps["reference"].returns_answer
    assert caps["answer-string"].reads_text and caps["answer-string"].needs_answer and not caps["answer-string"].reads_image
    assert caps["human"].source == "human" and caps["human"].needs_labels and caps["human"].adjudicates
    assert caps["openai-compatible"].needs_endpoint and caps["openai-compatible"].source == "model"
    assert not caps["openai-compatible"].adjudicates and caps["reference"].adjudicates
    for name, spec in judges.REGISTRY.items():       # the class behind each name carries that name and those flags
        assert judges.describe(name).startswith(f"{name} ({spec.capabilities.source} labels): ")
    with pytest.raises(ValueError, match="registered twice"):
        judges.register("human", "again")(type("Dup", (), {"capabilities": caps["human"], "from_resources": None}))


def test_make_judge_by_name_and_auto(tmp_path):
    assert judges.make_judge("auto").name == "answer-string"            # no answer key: the model judge
    assert judges.make_judge("answer-string").capabilities.source == "model"
    with pytest.raises(judges.JudgeError, match="unknown judge 'oracle'; expected auto or one of reference"):
        judges.make_judge("oracle")
    with pytest.raises(judges.JudgeError, match="needs validate.labels"):
        judges.make_judge("human")
    with pytest.raises(judges.JudgeError, match="needs judges.url"):
        judges.make_judge("openai-compatible", url="http://x")
    (tmp_path / "l.csv").write_text("query_id,unit_id,label\nq1,u1,sufficient\n")
    assert judges.make_judge("human", labels=str(tmp_path / "l.csv")).name == "human"


def test_a_judge_is_never_compared_with_itself():
    first = judges.make_judge("answer-string")
    assert judges.second_judge(first, "answer-string") is None
    assert judges.second_judge(first, "auto") is None                   # auto resolves to the first judge here
    assert judges.second_judge(first, "") is None
    with pytest.raises(judges.JudgeError, match="needs validate.labels"):
        judges.second_judge(first, "human")                            # another judge is made (and may refuse)


def test_label_pairs_records_the_judges_source_and_memo_judges_once():
    import pandas as pd
    calls = []

    class Counting(judges.AnswerStringJudge):
        def judge(self, question, unit):
            calls.append((question["query_id"], unit["unit_id"]))
            return super().judge(question, unit)

    questions = pd.DataFrame({"query_id": ["q1"], "text": ["What was revenue?"], "answer": ["$5M"]})
    pairs = pd.DataFrame({"query_id": ["q1", "q1"], "unit_id": ["u1", "u2"]})
    texts = {"u1": "revenue $5M", "u2": "nothing"}
    view = lambda ids: {"unit_id": ids[0], "unit_ids": ids, "text": texts[ids[0]]}  # noqa: E731
    rows = judges.label_pairs(Counting(), pairs, questions, view, {"q1": "abc"})
    assert list(rows["label"]) == ["sufficient", "irrelevant"]
    assert set(rows["source"]) == {"model"} and set(rows["question_sha"]) == {"abc"}
    memo, qrec = judges.Memo(view), questions.set_index("query_id")
    calls.clear()
    assert [memo.label(Counting(), qrec, "q1", "u1") for _ in range(3)] == ["sufficient"] * 3
    assert calls == [("q1", "u1")]


def test_openai_compatible_judges_a_two_page_evidence_set_with_a_jpeg_page_blind(tmp_path):
    """All pages of an evidence set go in one request, in order, each with its own MIME type; the
    answer comes back with the label; the request holds no file name, path, caption or alt text."""
    import pandas as pd

    png, jpg = tmp_path / "IMG_5848_deck_p01.png", tmp_path / "cs_2024q1_deck_p02.jpg"
    Image.new("RGB", (40, 20), (10, 120, 200)).save(png)
    Image.new("RGB", (40, 20), (200, 120, 10)).save(jpg, format="JPEG")
    units = pd.DataFrame({"unit_id": ["d:1", "d:2"], "image_path": [str(png), str(jpg)],
                          "caption": ["Corvane Systems delivers a record quarter", ""],
                          "alt_text": ["", "revenue chart alt"], "filename": [png.name, jpg.name]})
    view = judges.unit_view(units, ["d:1", "d:2"], {"d:1": "", "d:2": ""})
    srv = _Server([("ok", '{"label": "sufficient", "answer": "$437M", "rationale": "both pages together"}')])
    with srv as url:
        got = judges.OpenAICompatibleJudge(url, "tiny-vlm", retries=0).judge({"text": "What was revenue?"}, view)
    assert (got.label, got.answer) == ("sufficient", "$437M")
    parts = srv.requests[0]["body"]["messages"][1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[2]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    body = json.dumps(srv.requests[0]["body"])
    for leak in ("IMG_5848", "cs_2024q1", str(tmp_path), "record quarter", "revenue chart alt", "d:1"):
        assert leak not in body, leak


def test_openai_compatible_samples_vote_with_ties_to_the_lower_label(page):
    replies = [("ok", '{"label": "sufficient", "rationale": "a"}'), ("ok", '{"label": "supporting", "rationale": "b"}'),
               ("ok", '{"label": "sufficient", "rationale": "c"}')]
    srv = _Server(replies)
    with srv as url:
        got = judges.OpenAICompatibleJudge(url, "tiny-vlm", retries=0, samples=3, temperature=0.7).judge({"text": "Q?"}, page)
    assert got.label == "sufficient" and (got.samples, got.temperature) == (3, 0.7) and len(srv.requests) == 3
    assert "majority of 3 at temperature 0.7: sufficient 2, supporting 1, irrelevant 0" in got.rationale
    assert judges.majority(["sufficient", "supporting"]) == "supporting"           # a tie goes to the lower label
    assert judges.majority(["irrelevant", "sufficient"]) == "irrelevant"


def test_kappa_ci_brackets_kappa_and_matches_the_slow_definition():
    import numpy as np
    rng = np.random.default_rng(0)
    labs = np.array(judges.LABELS, dtype=object)
    a = list(labs[rng.integers(0, 3, 300)])
    b = [x if rng.random() < 0.7 else labs[rng.integers(0, 3)] for x in a]
    lo, hi = judges.kappa_ci(a, b, n_boot=400, seed=1)
    k = judges.cohen_kappa(a, b)
    assert lo < k < hi and hi - lo < 0.25
    got = judges.agreement(a, b)
    assert (got["kappa_lo"], got["kappa_hi"]) == judges.kappa_ci(a, b) and got["kappa"] == k
    assert judges.kappa_ci(a[:1], b[:1]) != judges.kappa_ci(a[:1], b[:1])          # nan: undefined on one pair



def _kappa_ci_in_one_piece(a, b, n_boot=1000, seed=0, level=0.95):
    # the bootstrap as first written: every (replicate, pair) cell in one int64 array
    import numpy as np
    code = {lab: i for i, lab in enumerate(judges.LABELS)}
    x = np.asarray([code[v] for v in a], dtype=np.int64)
    y = np.asarray([code[v] for v in b], dtype=np.int64)
    n, m = len(x), len(judges.LABELS)
    idx = np.random.default_rng([seed, 77]).integers(0, n, size=(n_boot, n))
    cells = (x[idx] * m + y[idx]) + (np.arange(n_boot)[:, None] * m * m)
    cm = np.bincount(cells.ravel(), minlength=n_boot * m * m).reshape(n_boot, m, m).astype(float)
    po = np.trace(cm, axis1=1, axis2=2) / n
    pe = (cm.sum(axis=2) * cm.sum(axis=1)).sum(axis=1) / n ** 2
    one_label = ((cm.sum(axis=2) > 0).sum(axis=1) < 2) | ((cm.sum(axis=1) > 0).sum(axis=1) < 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas = np.where((pe < 1.0) & ~one_label, (po - pe) / (1 - pe), np.nan)
    values = kappas[~np.isnan(kappas)]
    if not len(values):
        return float("nan"), float("nan")
    lo, hi = np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


@pytest.mark.parametrize("n, slab", [(2, 1 << 20), (37, 100), (500, 1 << 20), (500, 1200), (2000, 1)])
def test_kappa_ci_in_slabs_gives_the_one_piece_bounds_bit_for_bit(monkeypatch, n, slab):
    # slabs of replicates (one replicate per slab, several with a remainder, or all in one): the
    # same draws, the same counts, the same bounds as the one-piece computation
    import numpy as np
    rng = np.random.default_rng(n)
    labs = np.array(judges.LABELS, dtype=object)
    a = list(labs[rng.integers(0, 3, n)])
    b = [x if rng.random() < 0.6 else labs[rng.integers(0, 3)] for x in a]
    from lookalike.judging import agreement

    monkeypatch.setattr(agreement, "KAPPA_SLAB", slab)
    assert judges.kappa_ci(a, b, n_boot=300, seed=3) == _kappa_ci_in_one_piece(a, b, n_boot=300, seed=3)

def test_kappa_is_undefined_when_one_judge_gives_one_label_and_the_raw_agreement_is_said():
    people = ["irrelevant"] * 6                                  # people's labels hold one value
    model = ["irrelevant", "sufficient", "irrelevant", "supporting", "irrelevant", "irrelevant"]
    row = judges.agreement(model, people)
    assert row["kappa"] != row["kappa"] and row["kappa_lo"] != row["kappa_lo"]   # was 0.00 [0.00, 0.00]
    words = kappa_words(row)
    assert words.startswith("kappa undefined") and "raw agreement 0.67 over 6 pairs" in words


def test_kappa_words_never_print_nan_and_read_csv_text():
    assert kappa_words({"kappa": 0.153, "kappa_lo": 0.11, "kappa_hi": 0.19}) == "kappa 0.15 [0.11, 0.19]"
    assert kappa_words({"kappa": "", "kappa_lo": "", "kappa_hi": ""}).startswith("kappa undefined")
    assert kappa_words({"kappa": "0.5", "kappa_lo": "0.4", "kappa_hi": "0.6"}) == "kappa 0.50 [0.40, 0.60]"
    assert "nan" not in kappa_words(judges.agreement(["sufficient"] * 3, ["sufficient"] * 3))


# ----------------------------------------------------------------------------- label semantics

@pytest.fixture(scope="module")
def ci_demo(tmp_path_factory):
    from lookalike.data import demo

    return demo.generate("ci", 7, tmp_path_factory.mktemp("demo") / "corpus")


def test_reference_calls_the_on_subject_look_alike_supporting(ci_demo):
    """The look-alike that prints the asked metric for the asked entity in another period is
    'supporting' (on the subject, insufficient alone); the old judge called it irrelevant."""
    from lookalike.data import demo

    c = ci_demo
    judge = judges.ReferenceJudge(c.facts, c.answer_key, c.units, demo.REGIONS)
    key = c.answer_key[(c.answer_key["op"] == "value") & (c.answer_key["metric"] == "operating_income")]
    qid = key["query_id"].iloc[0]
    q = c.questions.set_index("query_id").loc[qid].to_dict() | {"query_id": qid}
    need = key.iloc[0]
    u = c.units
    same = u[(u["entity"] == need["entity"]) & (u["template_id"] == "kpi_table") & (u["period"] != need["period"])
             & (u["revision"] == 1)]
    # a KPI table of the same entity a year later prints this period as its comparison column: the
    # look-alike two periods away does not
    far = [x for x in same["unit_id"] if not ((c.facts["unit_id"] == x) & (c.facts["period"] == need["period"])).any()]
    assert far, "no look-alike without the asked period"
    got = judge.judge(q, {"unit_id": far[0]})
    assert got.label == "supporting" and "on the subject" in got.rationale
    other_entity = u[(u["entity"] != need["entity"]) & (u["template_id"] == "kpi_table")]["unit_id"].iloc[0]
    assert judge.judge(q, {"unit_id": other_entity}).label == "irrelevant"      # template look-alike, other entity
    risk = u[(u["entity"] == need["entity"]) & (u["template_id"] == "risk_factors")]["unit_id"].iloc[0]
    assert judge.judge(q, {"unit_id": risk}).label == "irrelevant"              # same entity, no such figure


def test_answer_string_supporting_needs_the_asked_entity_and_metric(ci_demo):
    judge = judges.AnswerStringJudge.from_resources(units=ci_demo.units)
    q = {"text": "What was Corvane Systems' operating income in Q1 FY2024?", "answer": "$183M"}
    same_subject = {"text": "Key figures Q3 FY2024 Operating income $190M $170M CORVANE SYSTEMS Page 4"}
    assert judge.judge(q, same_subject).label == "supporting"
    # the same template's words (title, columns, period) for another entity: the old rule called
    # this supporting because most subject terms were there
    look_alike = {"text": "Key figures Q1 FY2024 compared with Q1 FY2023 Metric Operating income $88M income "
                          "HALVORSEN ENERGY Page 4"}
    assert judges.AnswerStringJudge().judge(q, look_alike).label == "supporting"      # no vocabulary: the old rule
    assert judge.judge(q, look_alike).label == "irrelevant"
    assert judge.judge(q, {"text": "Operating income $183M CORVANE SYSTEMS"}).label == "sufficient"


def test_the_answer_string_judge_abstains_where_it_cannot_see():
    """Seen on photos with captions: no answers and no OCR text, and every pair was labelled
    'irrelevant' — then counted as measured."""
    from lookalike.judging import judges
    from lookalike.judging.protocol import ABSTAIN

    judge = judges.make_judge("answer-string")
    no_answer = judge.judge({"text": "A lone person skiing", "answer": ""}, {"text": "ski slope, person"})
    no_text = judge.judge({"text": "revenue of Acme in 2023?", "answer": "$12M"}, {"text": "  "})
    assert no_answer.label == ABSTAIN and "no answer" in no_answer.rationale
    assert no_text.label == ABSTAIN and "no text" in no_text.rationale
    assert judge.judge({"text": "revenue of Acme?", "answer": "$12M"}, {"text": "Acme revenue $12M"}).label == "sufficient"
    pairs = pd.DataFrame({"query_id": ["q1", "q2"], "unit_id": ["u1", "u2"]})
    questions = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["revenue of Acme?", "revenue of Acme?"],
                              "answer": ["$12M", "$12M"]})
    texts = {"u1": "Acme revenue $12M", "u2": ""}
    labels = judges.label_pairs(judge, pairs, questions, lambda ids: {"text": texts[ids[0]]})
    assert list(labels["unit_id"]) == ["u1"] and sum(labels.attrs["abstained"].values()) == 1


def test_photos_are_labelled_by_the_photo_rubric():
    """Seen on photos with captions: the rubric asked whether a photo 'answers' a descriptive query,
    in words written for financial filings."""
    from lookalike.report import pages
    from lookalike.vocab import label_meanings, unit_noun

    assert unit_noun("manifest", ["photo", "photo"]) == "photo" and unit_noun("images") == "image"
    assert unit_noun("pdf", ["chart", "photo"]) == "page"
    data = {"page": "p", "items": [], "images": {}}
    photo = pages.labelling_page("t", data, "photo") + pages.label_server_page("image")
    assert label_meanings("photo")["sufficient"] in photo and "competent reader" not in photo
    assert "competent reader" in pages.labelling_page("t", data)
