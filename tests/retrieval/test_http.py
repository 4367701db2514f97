"""One reply cache for every service lookalike calls (rerank, query splitting, the openai-compatible
judge): keys as each caller made them before (so caches written earlier are read), entries written
whole, a damaged one said and asked again."""

from __future__ import annotations

import hashlib
import json

from lookalike.retrieval.http import ReplyCache


def test_keys_are_the_sha256_of_the_parts_as_json_as_the_callers_made_them():
    # rerank: json.dumps([id, query, documents], ensure_ascii=False); split: json.dumps([id, question])
    rerank_old = hashlib.sha256(json.dumps(["r", "qué", ["a", "b"]], ensure_ascii=False).encode("utf-8")).hexdigest()
    assert ReplyCache.key("r", "qué", ["a", "b"], ensure_ascii=False) == rerank_old
    split_old = hashlib.sha256(json.dumps(["s", "qué"]).encode("utf-8")).hexdigest()
    assert ReplyCache.key("s", "qué") == split_old != rerank_old


def test_a_reply_comes_back_and_a_damaged_one_is_said_and_asked_again(tmp_path, capsys):
    cache = ReplyCache(tmp_path / "rerank")
    assert cache.get("k") is None
    cache.put("k", [0.5, 1.0])
    assert cache.get("k") == [0.5, 1.0] and [p.name for p in (tmp_path / "rerank").iterdir()] == ["k.json"]
    assert cache.get("k", lambda v: len(v) == 3) is None
    assert "k.json is damaged (not the reply's shape)" in capsys.readouterr().err
    (tmp_path / "rerank" / "k.json").write_text('[0.5, 1.')
    assert cache.get("k") is None and "damaged (JSONDecodeError)" in capsys.readouterr().err


def test_no_folder_keeps_nothing(tmp_path):
    cache = ReplyCache(None)
    cache.put("k", {"reply": "x"})
    assert cache.get("k") is None
