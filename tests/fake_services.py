"""Local stand-ins for the HTTP services lookalike calls (rerank, chat), started by the tests: no
real model server can be reached from the build machines."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", str(text).lower()))


def lexical_rerank(body: dict) -> tuple[int, dict]:
    """/v1/rerank: relevance = shared words between the query and each document (Jina/Cohere shape)."""
    q = words(body["query"])
    scores = [len(q & words(d)) / (1 + len(words(d))) ** 0.25 for d in body["documents"]]
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return 200, {"results": [{"index": i, "relevance_score": scores[i]} for i in order[: body.get("top_n", len(order))]]}


def and_splitter(body: dict) -> tuple[int, dict]:
    """/v1/chat/completions: split the question at ' and ' / commas into a JSON list; a question with
    'UNREADABLE' gets prose with no list."""
    question = body["messages"][-1]["content"]
    if "UNREADABLE" in question:
        content = "I cannot split this."
    else:
        parts = [p.strip() for p in re.split(r",| and ", question) if p.strip()]
        content = "Here you are:\n```json\n" + json.dumps(parts) + "\n```"
    return 200, {"choices": [{"message": {"role": "assistant", "content": content}}]}


class Services:
    """A local server: routes maps a path suffix ('/rerank', '/chat/completions') to a function
    body -> (status, payload). requests: every (path, body, headers) received; down=True answers
503 to everything."""

    def __init__(self, routes=None, down: bool = False):
        self.routes = routes or {"/rerank": lexical_rerank, "/chat/completions": and_splitter}
        self.down, self.requests = down, []
        services = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                services.requests.append((self.path, body, dict(self.headers)))
                if services.down:
                    return self._send(503, {"error": "overloaded"})
                for suffix, fn in services.routes.items():
                    if self.path.endswith(suffix):
                        return self._send(*fn(body))
                return self._send(404, {"error": f"no route {self.path}"})

            def _send(self, code, payload):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
