"""The openai-compatible judge: a vision-language model behind an OpenAI-compatible chat-completions
endpoint (vLLM, Ollama, hosted): page image as base64, a fixed rubric, strict parsing, retries with
backoff, replies cached on disk, the API key from an environment variable and never written anywhere."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from collections.abc import Mapping, Sequence



from lookalike.data.schema import image_data_url
from lookalike.retrieval.http import JsonClient, ReplyCache, ServiceError, endpoint_url
from lookalike.vocab import LABEL_GRADES, LABEL_MEANINGS, LABELS


from lookalike.judging.protocol import Capabilities, JudgeError, Judgement, register


RUBRIC = (
    "You judge whether a document page (or a set of pages, shown in order) answers a question. Look only at\n"
    "the page images. Reply with one JSON object and nothing else: {\"label\": L, \"answer\": A,\n"
    "\"rationale\": R}, where A is the answer the pages give (\"\" when they give none), R is one short\n"
    "sentence and L is\n" + ";\n".join(f"\"{lab}\" if {LABEL_MEANINGS[lab]}" for lab in LABELS) + ".\n"
)


def parse_reply(content: str) -> tuple[str, str, str]:
    """Strictly parse the model's reply: a JSON object with a known label (a fenced block is
    allowed) -> (label, answer, rationale); answer and rationale may be absent."""
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.S)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JudgeError(f"reply is not a JSON object: {content[:120]!r}") from exc
    if not isinstance(obj, dict) or obj.get("label") not in LABELS:
        raise JudgeError(f"reply has no valid label (expected one of {', '.join(LABELS)}): {content[:120]!r}")
    return obj["label"], str(obj.get("answer", "") or "")[:200], str(obj.get("rationale", ""))[:300]


def majority(labels: Sequence[str]) -> str:
    """The most frequent label; a tie goes to the lower label (irrelevant < supporting < sufficient)."""
    counts = {lab: list(labels).count(lab) for lab in LABELS}
    best = max(counts.values())
    return min((lab for lab, n in counts.items() if n == best), key=lambda lab: LABEL_GRADES[lab])


def image_part(path: Path) -> dict:
    """One page for the request: a data URI with the MIME type of the file's content."""
    return {"type": "image_url", "image_url": {"url": image_data_url(path)}}


@register("openai-compatible", "a vision-language model's labels: model-only until their agreement with people's "
                               "labels is measured")
class OpenAICompatibleJudge:
    """A VLM behind an OpenAI-compatible /chat/completions endpoint.

    base_url: e.g. http://localhost:8000/v1; model: the served model name; api_key_env: the name of
    the environment variable holding the key (the key itself is never stored or logged);
    cache_dir: replies cached by sha256 of (model, rubric, question, samples, temperature, every
    page's bytes). An evidence set's pages go in one request, in order; each page's MIME type is
    read from its content. samples: replies per judgement (each its own request), the label their
    majority (ties to the lower label); samples and temperature are recorded with the label.
    The request carries the rubric, the question and the page pixels only — no file name, path,
    caption or alt text.
    """

    capabilities = Capabilities("model", reads_image=True, judges_sets=True, returns_answer=True, needs_endpoint=True)

    @classmethod
    def from_resources(cls, url="", model="", cache_dir=None, samples=1, temperature=0.0, timeout_s=60.0,
                       max_attempts=4, **_):
        """The model judge for a run, from the judges.* settings (url and model required)."""
        if not url or not model:
            raise JudgeError("the openai-compatible judge needs judges.url and judges.model")
        return cls(url, model, cache_dir=cache_dir, samples=samples, temperature=temperature, timeout=float(timeout_s),
                   retries=max(int(max_attempts), 1) - 1)

    def __init__(self, base_url: str, model: str, api_key_env: str = "LOOKALIKE_JUDGE_API_KEY",
                 cache_dir: Path | str | None = None, timeout: float = 60.0, retries: int = 3, backoff: float = 1.0,
                 temperature: float = 0.0, samples: int = 1):
        if samples < 1:
            raise JudgeError(f"the openai-compatible judge needs samples >= 1, got {samples}")
        self.url = endpoint_url(base_url, "/chat/completions")
        self.model, self.api_key_env = model, api_key_env
        self.cache = ReplyCache(cache_dir)
        self.timeout, self.retries, self.backoff, self.temperature = timeout, retries, backoff, temperature
        self.samples = samples
        # one try per call: the attempts are counted here, where a garbled reply is retried as well
        self.client = JsonClient(self.url, api_key_env, timeout, retries=0)

    def _key(self, question: str, images: Sequence[bytes]) -> str:
        h = hashlib.sha256()
        for part in (self.model, RUBRIC, question, f"samples={self.samples}", f"temperature={self.temperature}"):
            h.update(part.encode("utf-8") + b"\0")
        for image in images:
            h.update(hashlib.sha256(image).digest())
        return h.hexdigest()

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        """The model's label for the unit's image(s) and the question, from the reply cache when it holds one."""
        paths = [Path(p) for p in (unit.get("image_paths") or [unit["image_path"]])]
        qtext = str(question["text"])
        key = self._key(qtext, [p.read_bytes() for p in paths]) if self.cache.folder else ""
        c = self.cache.get(key, lambda v: isinstance(v, dict) and v.get("label") in LABELS and "rationale" in v) \
            if key else None
        if c is not None:
            return Judgement(c["label"], c["rationale"], self.name, c.get("answer", ""), self.samples, self.temperature)
        content = [{"type": "text", "text": f"Question: {qtext}"}] + [image_part(p) for p in paths]
        payload = {"model": self.model, "temperature": self.temperature,
                   "messages": [{"role": "system", "content": RUBRIC}, {"role": "user", "content": content}]}
        replies = [self._one(payload) for _ in range(self.samples)]
        label = majority([r[0] for r in replies])
        answer, rationale = next((a, why) for lab, a, why in replies if lab == label)
        if self.samples > 1:
            votes = ", ".join(f"{lab} {sum(r[0] == lab for r in replies)}" for lab in LABELS)
            rationale = f"{rationale} [majority of {self.samples} at temperature {self.temperature:g}: {votes}]"
        else:
            rationale = f"{rationale} [1 sample at temperature {self.temperature:g}]"
        if key:
            self.cache.put(key, {"label": label, "answer": answer, "rationale": rationale})
        return Judgement(label, rationale, self.name, answer, self.samples, self.temperature)

    def _one(self, payload: dict) -> tuple[str, str, str]:
        """One reply, with retries and exponential backoff on a network error or an unparseable reply."""
        last = None
        for attempt in range(self.retries + 1):
            try:
                reply = self.client.request(payload)
                return parse_reply(reply["choices"][0]["message"]["content"])
            except (ServiceError, KeyError, IndexError, TypeError, JudgeError) as exc:
                last = exc
                if attempt < self.retries:
                    time.sleep(self.backoff * 2 ** attempt)
        raise JudgeError(f"{self.url}: no valid judgement after {self.retries + 1} attempts: {last}")
