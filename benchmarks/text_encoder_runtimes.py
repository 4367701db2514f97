"""The MiniLM text encoder (ocr-minilm, caption-minilm) in three runtimes, on the same texts in one run.

    python benchmarks/text_encoder_runtimes.py                 # 512 page-like texts, 50 queries
    python benchmarks/text_encoder_runtimes.py --texts 2000 --rounds 5

Every runtime embeds in the shipped fixed-shape passes (retrieval.encoders.text.embed_in_passes), so
only the forward differs:
  torch   the shipped path: sentence-transformers on torch, float32
  int8    torch's dynamic int8 quantisation of the transformer's Linear layers
  onnx    the same float32 graph exported to ONNX and run by ONNX Runtime (needs the ``onnx``
          package to export; without it this runtime is reported as not measured)
For each: texts per second (median of --rounds), the largest difference in a query-text score
against torch, and the share of queries whose top 10 is the same list in the same order. lookalike
would switch runtime only where it is faster *and* its scores stay within 1e-6 of torch's.
Last line: ``onnx_vs_torch=R int8_vs_torch=R onnx_max_score_diff=D int8_max_score_diff=D`` (nan when a
runtime was not measured).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WORDS = ("revenue income quarter net sales operating margin total assets cash flow fiscal year ended segment "
         "product services interest tax expense share diluted basic liabilities equity inventory research").split()


def texts_like_pages(n: int, seed: int) -> list[str]:
    """Page-like texts of 20 to 400 words (numbers among them), a fixed draw."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = list(rng.choice(WORDS, int(rng.integers(20, 400))))
        for j in rng.integers(0, len(words), size=max(1, len(words) // 12)):
            words[int(j)] = f"{int(rng.integers(1, 99999)):,}"
        out.append(" ".join(words))
    return out


def torch_forward(model):
    import torch

    def forward(feats):
        with torch.inference_mode():
            vecs = model.forward({k: torch.from_numpy(v) for k, v in feats.items()})["sentence_embedding"]
            return torch.nn.functional.normalize(vecs.float(), dim=-1).numpy()
    return forward


def int8_forward(model):
    import torch

    quantised = copy.deepcopy(model)
    # sentence-transformers' Transformer keeps the model as .model (auto_model is a read-only view of it)
    quantised[0].model = torch.ao.quantization.quantize_dynamic(quantised[0].model, {torch.nn.Linear},
                                                                dtype=torch.qint8)
    assert quantised[0].auto_model is quantised[0].model
    return torch_forward(quantised)


def onnx_forward(model, folder: Path):
    """None when the onnx package (the exporter's) is missing."""
    try:
        import onnx  # noqa: F401
        import onnxruntime as ort
    except ImportError:
        return None
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, transformer):
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                      token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = model.tokenizer(["a"], padding="max_length", max_length=16, return_tensors="pt")
    path = folder / "minilm.onnx"
    torch.onnx.export(Pooled(model[0].auto_model).eval(), tuple(example[n] for n in names), str(path),
                      input_names=names, output_names=["embedding"], opset_version=17, dynamo=False,
                      dynamic_axes={n: {0: "rows", 1: "tokens"} for n in names})
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda feats: session.run(None, {n: feats[n] for n in names})[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", type=int, default=512)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from lookalike.retrieval.encoders import text

    model = text.load_model("cpu")
    texts, queries = texts_like_pages(args.texts, args.seed), [" ".join(q.split()[:8]) for q in
                                                              texts_like_pages(args.queries, args.seed + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        runtimes = {"torch": torch_forward(model), "int8": int8_forward(model), "onnx": onnx_forward(model, Path(tmp))}
        rate, scores = {}, {}
        for name, forward in runtimes.items():
            if forward is None:
                print(f"{name}: not measured (pip install onnx to export the model)")
                continue
            embed = lambda batch, f=forward: text.embed_in_passes(batch, model.tokenizer, int(model.max_seq_length), f)  # noqa: E731
            embed(texts[:4])                                   # the first pass builds what a runtime caches
            times = []
            for _ in range(args.rounds):
                start = time.perf_counter()
                pages = embed(texts)
                times.append(time.perf_counter() - start)
            rate[name] = len(texts) / statistics.median(times)
            scores[name] = embed(queries) @ pages.T
    base = scores["torch"]
    top = np.argsort(-base, axis=1, kind="stable")[:, :10]
    line = {}
    for name in ("torch", "int8", "onnx"):
        if name not in rate:
            line.update({f"{name}_vs_torch": float("nan"), f"{name}_max_score_diff": float("nan")})
            continue
        diff = float(np.abs(scores[name] - base).max())
        same = float((np.argsort(-scores[name], axis=1, kind="stable")[:, :10] == top).all(axis=1).mean())
        print(f"{name:6s} {rate[name]:7.1f} texts/s   max |score - torch's| {diff:.2e}   same top 10: {same:.0%} of "
              f"{len(queries)} queries")
        line.update({f"{name}_vs_torch": rate[name] / rate["torch"], f"{name}_max_score_diff": diff})
    print(f"onnx_vs_torch={line['onnx_vs_torch']:.2f} int8_vs_torch={line['int8_vs_torch']:.2f} "
          f"onnx_max_score_diff={line['onnx_max_score_diff']:.1e} int8_max_score_diff={line['int8_max_score_diff']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
