"""One JSON-over-HTTP client for the services lookalike calls — embedding (/v1/embeddings), rerank
(/v1/rerank) and chat (/v1/chat/completions) endpoints, the openai-compatible judge — and one cache
of their replies (``ReplyCache``), so a re-run asks no service the same thing twice.

Retries with exponential backoff (``Retry-After`` honoured) on a network error, a timeout, HTTP 429
or 5xx; after the last one, ``unavailable`` is raised (the server is down: the pass stops). Any
other HTTP error, or a reply that is not JSON, raises ``refused`` at once — the caller decides what
an item that fails that way means. The API key is read from the named environment variable when a
request is made and is never written: not in an id, a cache, a table or an error message.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable
import urllib.error
import urllib.request


class ServiceError(RuntimeError):
    """A service refused or garbled a request; the message names the URL and why."""


class ServiceUnavailable(ServiceError):
    """No reply after every retry."""


class _Transient(Exception):
    def __init__(self, reason: str, wait: float | None = None):
        super().__init__(reason)
        self.wait = wait


class JsonClient:
    """POST JSON to one URL; ``request(payload)`` returns the decoded reply."""

    def __init__(self, url: str, api_key_env: str = "", timeout_s: float = 60.0, retries: int = 4,
                 backoff_s: float = 1.0, refused: type = ServiceError, unavailable: type = ServiceUnavailable):
        self.url, self.api_key_env = url, api_key_env
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), int(retries), float(backoff_s)
        self.refused, self.unavailable = refused, unavailable
        self.requests = 0

    def _post(self, payload: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"), headers=headers,
                                     method="POST")
        self.requests += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", errors="replace")
            if exc.code == 429 or exc.code >= 500:
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                wait = float(retry_after) if retry_after and retry_after.replace(".", "", 1).isdigit() else None
                raise _Transient(f"HTTP {exc.code}: {detail}", wait) from None
            raise self.refused(f"{self.url}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}") from None
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise self.refused(f"{self.url}: the reply is not JSON: {body[:120]!r}") from None

    def request(self, payload: dict) -> dict:
        """POST payload and return the reply's JSON; transient failures are retried with backoff, then raised as
        unavailable."""
        last = ""
        for attempt in range(self.retries + 1):
            try:
                return self._post(payload)
            except _Transient as exc:
                last = str(exc)
                if attempt < self.retries:
                    time.sleep(exc.wait if exc.wait is not None else self.backoff_s * 2 ** attempt)
        raise self.unavailable(f"{self.url}: no reply after {self.retries + 1} attempts: {last}")


def endpoint_url(base: str, path: str) -> str:
    """base (e.g. http://host:8000/v1) joined with path ('/rerank'), unless base already ends with it."""
    base = base.rstrip("/")
    return base if base.endswith(path) else base + path


class ReplyCache:
    """A service's replies as JSON files, one per request key, in folder (nothing is kept when folder is
    None). The caller makes the key from everything the reply depends on (``key``); an entry is written
    whole or not at all, and a damaged one is said on stderr and asked again."""

    def __init__(self, folder: Path | str | None):
        self.folder = Path(folder) if folder else None

    @staticmethod
    def key(*parts: Any, ensure_ascii: bool = True) -> str:
        """sha256 of the parts as JSON."""
        return hashlib.sha256(json.dumps(list(parts), ensure_ascii=ensure_ascii).encode("utf-8")).hexdigest()

    def get(self, key: str, valid: Callable[[Any], bool] = lambda value: True) -> Any | None:
        """The reply kept under key, or None: none kept, or a damaged entry (not JSON, or not what
        valid accepts), which is said on stderr and asked again."""
        path = self.folder / f"{key}.json" if self.folder else None
        if path is None or not path.is_file():
            return None
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
            if valid(value):
                return value
            why = "not the reply's shape"
        except (OSError, ValueError) as exc:
            why = type(exc).__name__
        print(f"lookalike: {path} is damaged ({why}); asking the service again", file=sys.stderr)
        return None

    def put(self, key: str, value: Any) -> None:
        """Keep a reply under key (written to a temporary file first, so a crash never leaves half a reply)."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f"{key}.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(value), encoding="utf-8")
        tmp.replace(self.folder / f"{key}.json")
