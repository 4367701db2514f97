"""The openai-compatible judge (judging.openai_judge) against a local fake server: request shape, cache, retries, evidence sets, sampled votes."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import pytest
from lookalike.judging import judges
from PIL import Image


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
