"""Question splitting (retrieval.splitting): sub-queries parsed from a chat reply, merged round robin, a chat endpoint's splits cached and its failures listed."""

from __future__ import annotations

import pandas as pd
import pytest
from lookalike.retrieval import splitting
from tests.fake_services import Services


def test_parse_subqueries_reads_json_anywhere_or_numbered_lines_and_refuses_nothing():
    assert splitting.parse_subqueries('Sure: ["revenue Q1", "revenue Q2", "revenue q1"]', 4) == ["revenue Q1", "revenue Q2"]
    assert splitting.parse_subqueries("1. revenue 2023\n2) revenue 2024\n- headcount", 2) == ["revenue 2023", "revenue 2024"]
    with pytest.raises(splitting.SplitError, match="no sub-queries"):
        splitting.parse_subqueries("I cannot help with that.", 4)
    with pytest.raises(splitting.SplitError):
        splitting.parse_subqueries("[]", 4)


def test_round_robin_merge_places_each_unit_once_in_sub_query_order():
    splits = pd.DataFrame({"query_id": ["q", "q"], "sub_id": ["q~1", "q~2"], "position": [1, 2], "text": ["x", "y"]})
    sub = pd.DataFrame({"query_id": ["q~1"] * 3 + ["q~2"] * 3, "unit_id": ["a", "b", "c", "b", "d", "e"],
                        "score": [3.0, 2.0, 1.0, 3.0, 2.0, 1.0]})
    merged = splitting.merge_round_robin(sub, splits, depth=4)
    assert list(merged.sort_values("score", ascending=False)["unit_id"]) == ["a", "b", "d", "c"]


def test_chat_splitter_decomposes_caches_and_lists_what_it_could_not_split(tmp_path):
    questions = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["revenue in 2023 and revenue in 2024",
                                                                 "UNREADABLE question"]})
    with Services() as server:
        sp = splitting.ChatSplitter(server.url, "toy-chat", max_subqueries=3, backoff_s=0.01, cache_dir=tmp_path)
        out = splitting.split_questions(sp, questions)
        assert list(out.table["text"]) == ["revenue in 2023", "revenue in 2024", "UNREADABLE question"]
        assert out.failed and out.failed[0][0] == "q2" and "no sub-queries" in out.failed[0][1]
        path, body, _ = server.requests[0]
        assert path == "/v1/chat/completions" and body["temperature"] == 0 and body["model"] == "toy-chat"
        n = len(server.requests)
        splitting.split_questions(splitting.ChatSplitter(server.url, "toy-chat", max_subqueries=3, cache_dir=tmp_path), questions)
        assert len(server.requests) == n                    # both replies cached (the unreadable one reads the same again)
    with Services(down=True) as server:
        with pytest.raises(splitting.SplitUnavailable):
            splitting.split_questions(splitting.ChatSplitter(server.url, "m", retries=1, backoff_s=0.01), questions)
