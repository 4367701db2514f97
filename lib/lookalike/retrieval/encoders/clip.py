"""Dual encoders through transformers: CLIP, SigLIP and SigLIP-2 (any model with
``get_image_features`` and ``get_text_features``), from a local folder or a hub id on a machine
that can reach a hub.

One model embeds the page image (the pixel index), the caption fields as text (the leak
ablation's caption index for this model, ``encode_captions``) and the questions, all into one
space — what the ablation's image / caption / both indexes assume. Vectors are L2-normalised, so
the dense index's dot product is the cosine the models were trained with.

No weights ship with any package and no hub is reachable on the project's build machines: the
path is tested with tiny randomly initialised CLIP, SigLIP and SigLIP-2 models built at test time.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Sequence

import numpy as np
import pandas as pd
from PIL import Image

from lookalike.io.cache import Cache
from lookalike.retrieval.encoders.base import EncodeError, Encoder, Vectors, cached_pages, pending_pages
from lookalike.retrieval.encoders.colpali import _model_revision

HOW_TO = ("set encode.settings.clip.model to a local folder holding a CLIP / SigLIP / SigLIP-2 model (config.json, "
          "weights, processor files), e.g. one downloaded with `huggingface-cli download google/siglip2-base-patch16-224` "
          "on a machine with internet, or to a hub id on a machine that can reach the hub")


def _features(out):
    """transformers 5 returns a model output whose pooler_output is the projected embedding; older
    versions return the tensor itself."""
    return getattr(out, "pooler_output", out) if not hasattr(out, "shape") else out


class ClipEncoder(Encoder):
    """Page pixels -> one image embedding; questions and captions -> text embeddings of the same model."""

    name, provenance, kind = "clip", "pixels", "single"
    captions = True

    def __init__(self, model: str = "", max_length: int = 64, **kw):
        if not model:
            raise EncodeError(f"the clip encoder needs a model: {HOW_TO}")
        local = Path(model)
        if local.exists() and not (local / "config.json").is_file():
            raise EncodeError(f"{local}: no config.json; {HOW_TO}")
        super().__init__(model=str(model), max_length=int(max_length), **kw)
        self.revision = _model_revision(local) if local.exists() else "hub"
        self.model_type = json.loads((local / "config.json").read_text()).get("model_type", "") if local.exists() else ""
        self._model = None
        self._processor = None

    def load(self):
        """The model and its processor, loaded once (a local folder or a hub name; offline here)."""
        if self._model is None:
            import torch
            import transformers as tf

            path = self.settings["model"]
            local = Path(path).exists()
            dtype = torch.bfloat16 if self.dtype == "bfloat16" else torch.float32
            try:
                model = tf.AutoModel.from_pretrained(path, dtype=dtype, local_files_only=local).to(self.device).eval()
                processor = tf.AutoProcessor.from_pretrained(path, local_files_only=local)
            except (OSError, ValueError) as exc:
                raise EncodeError(f"cannot load a CLIP-style model from {path!r} ({exc}); {HOW_TO}") from exc
            for method in ("get_image_features", "get_text_features"):
                if not hasattr(model, method):
                    raise EncodeError(f"{path}: {type(model).__name__} has no {method}: the clip encoder needs a dual "
                                      "image-text model (CLIP, SigLIP, SigLIP-2)")
            self._model, self._processor = model, processor
            self.model_type = model.config.model_type
        return self._model, self._processor

    def _run(self, method: str, inputs) -> np.ndarray:
        import torch

        model, _ = self.load()
        with torch.no_grad():
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            if "pixel_values" in inputs and self.dtype == "bfloat16":
                inputs["pixel_values"] = inputs["pixel_values"].to(torch.bfloat16)
            out = _features(getattr(model, method)(**inputs)).float()
            out = torch.nn.functional.normalize(out, dim=-1)
        return out.cpu().numpy().astype(np.float32)

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """One normalised vector per image from the image tower."""
        _, processor = self.load()
        return self._run("get_image_features", processor(images=list(images), return_tensors="pt"))

    def _texts(self, texts: Sequence[str]) -> np.ndarray:
        _, processor = self.load()
        # SigLIP-family text towers were trained on max_length padding; CLIP's on the longest in the batch
        padding = "max_length" if self.model_type.startswith("siglip") else True
        out = []
        for start in range(0, len(texts), self.batch_size):
            batch = processor(text=list(texts[start:start + self.batch_size]), padding=padding, truncation=True,
                              max_length=self.settings["max_length"], return_tensors="pt")
            batch = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "position_ids")}
            out.append(self._run("get_text_features", batch))
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)

    def pending(self, units: pd.DataFrame, base_dir: Path, cache) -> list[int]:
        """Positions of the units whose page vectors the cache does not hold."""
        return pending_pages(units, base_dir, cache, self.id)

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        """One vector per page from its pixels (cached by image hash)."""
        ids, vecs, stats = cached_pages(self, units, base_dir, cache or Cache(), self.encode_images)
        data = np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, 0), np.float32)
        return Vectors(self.id, self.provenance, ids, data, "single", stats)

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        """One vector per question from the text tower."""
        return Vectors(self.id, "query-text", list(ids), self._texts(texts), "single")

    def encode_captions(self, texts: Sequence[str], ids: Sequence[str], cache: Cache | None = None) -> Vectors:
        """Caption text through the text tower: the leak ablation's caption index for this model."""
        return Vectors(self.id, "caption-text", list(ids), self._texts(texts), "single")
