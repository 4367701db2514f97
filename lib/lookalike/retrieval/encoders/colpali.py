"""ColPali-family multi-vector encoders through colpali-engine (ColPali, ColQwen2, ColIdefics3,
ColModernVBert), from a local model folder or a hub id on a machine that can reach a hub.

No weights ship with any package and no hub is reachable on the project's build machines, so the
path is tested with tiny randomly initialised models saved to a temporary folder at test time.
Optional token pooling (``pool_factor`` > 1) merges each page's patch vectors by hierarchical
clustering (colpali-engine's HierarchicalTokenPooler) to cut storage and MaxSim time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from PIL import Image

from lookalike import progress as bars
from lookalike.data.schema import resolve_image
from lookalike.io.cache import Cache, image_sha256
from lookalike.retrieval.encoders.base import EncodeError, Encoder, Vectors

FAMILIES = {
    # family: (model class, processor class, config model_type values that select it)
    "ColPali": ("ColPali", "ColPaliProcessor", ("paligemma",)),
    "ColQwen2": ("ColQwen2", "ColQwen2Processor", ("qwen2_vl",)),
    "ColIdefics3": ("ColIdefics3", "ColIdefics3Processor", ("idefics3",)),
    "ColModernVBert": ("ColModernVBert", "ColModernVBertProcessor", ("modernvbert",)),
}

HOW_TO = ("set encode.colpali_model to a local folder holding a ColPali-family model (config.json, weights, "
          "processor files), e.g. one downloaded with `huggingface-cli download vidore/colqwen2-v1.0` on a "
          "machine with internet, or to a hub id on a machine that can reach the hub")


def detect_family(model_dir: Path) -> str:
    cfg_path = Path(model_dir) / "config.json"
    if not cfg_path.is_file():
        raise EncodeError(f"{model_dir}: no config.json; {HOW_TO}")
    cfg = json.loads(cfg_path.read_text())
    model_type = cfg.get("model_type", "")
    for family, (_, _, types) in FAMILIES.items():
        if model_type in types:
            return family
    archs = " ".join(cfg.get("architectures") or [])
    for family in FAMILIES:
        if family in archs:
            return family
    raise EncodeError(f"{model_dir}: cannot tell the ColPali family from config.json (model_type {model_type!r}); "
                      f"set encode.colpali_family to one of {', '.join(FAMILIES)}")


class ColPaliEncoder(Encoder):
    """Page pixels -> ColPali-family multi-vectors (one vector per image patch / token)."""

    name, provenance, kind = "colpali", "pixels", "multi"

    def __init__(self, model: str = "", family: str = "", pool_factor: int = 1, **kw):
        if not model:
            raise EncodeError(f"the colpali encoder needs a model: {HOW_TO}")
        local = Path(model)
        if local.exists():
            family = family or detect_family(local)
        elif not family:
            raise EncodeError(f"model {model!r} is not a local folder; {HOW_TO} (and set encode.colpali_family "
                              "for a hub id)")
        if family not in FAMILIES:
            raise EncodeError(f"unknown ColPali family {family!r}; expected one of {', '.join(FAMILIES)}")
        super().__init__(model=str(model), family=family, pool_factor=pool_factor, **kw)
        self.family = family
        self.revision = _model_revision(local) if local.exists() else "hub"
        self._model = None
        self._processor = None

    def load(self):
        if self._model is None:
            import colpali_engine.models as cm
            import torch

            model_cls, proc_cls, _ = FAMILIES[self.family]
            path = self.settings["model"]
            local = Path(path).exists()
            dtype = torch.bfloat16 if self.dtype == "bfloat16" else torch.float32
            try:
                self._model = getattr(cm, model_cls).from_pretrained(
                    path, dtype=dtype, local_files_only=local, device_map=self.device).eval()
                self._processor = getattr(cm, proc_cls).from_pretrained(path, local_files_only=local)
            except OSError as exc:
                raise EncodeError(f"cannot load {self.family} model from {path!r} ({exc}); {HOW_TO}") from exc
        return self._model, self._processor

    def _embed(self, batch_inputs) -> list[np.ndarray]:
        import torch

        model, _ = self.load()
        with torch.no_grad():
            batch_inputs = {k: v.to(self.device) for k, v in batch_inputs.items()}
            out = model(**batch_inputs)
        mask = batch_inputs.get("attention_mask")
        vecs = []
        for i in range(out.shape[0]):
            v = out[i]
            if mask is not None:
                v = v[mask[i].bool()]
            vecs.append(v.float().cpu().numpy())
        return vecs

    def _pool(self, vecs: list[np.ndarray]) -> list[np.ndarray]:
        factor = int(self.settings.get("pool_factor", 1))
        if factor <= 1:
            return vecs
        import torch
        from colpali_engine.compression.token_pooling import HierarchicalTokenPooler

        pooler = HierarchicalTokenPooler()
        return [pooler.pool_embeddings([torch.from_numpy(v)], pool_factor=factor)[0].numpy() for v in vecs]

    def encode_images(self, images: Sequence[Image.Image]) -> list[np.ndarray]:
        _, processor = self.load()
        out = []
        for start in range(0, len(images), self.batch_size):
            batch = processor.process_images(list(images[start:start + self.batch_size]))
            out.extend(self._embed(batch))
        return self._pool(out)

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        cache = cache or Cache()
        t0 = time.perf_counter()
        paths = [resolve_image(p, base_dir) for p in units["image_path"]]
        shas = [image_sha256(p) for p in paths]
        vecs = [cache.get_array(s, self.id) for s in shas]
        todo = [i for i, v in enumerate(vecs) if v is None]
        starts = range(0, len(todo), self.batch_size)
        for start in bars.bar(starts, desc=f"{self.name} pages", unit="batch",
                              min_total=max(1, bars.MIN_TOTAL // self.batch_size)):
            chunk = todo[start:start + self.batch_size]
            images = []
            for i in chunk:
                with Image.open(paths[i]) as im:
                    images.append(im.convert("RGB"))
            for i, v in zip(chunk, self.encode_images(images)):
                vecs[i] = v.astype(np.float32)
                cache.put_array(shas[i], self.id, vecs[i])
        stats = {"computed": len(todo), "cached": len(vecs) - len(todo), "seconds": round(time.perf_counter() - t0, 2)}
        return Vectors(self.id, self.provenance, list(units["unit_id"]), vecs, "multi", stats)

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        _, processor = self.load()
        out = []
        for start in range(0, len(texts), self.batch_size):
            batch = processor.process_queries(list(texts[start:start + self.batch_size]))
            out.extend(self._embed(batch))
        return Vectors(self.id, "query-text", list(ids), out, "multi")


def _model_revision(folder: Path) -> str:
    """Hash of the folder's config and weight file names/sizes/mtimes: a changed model never hits old cache."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(folder)}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:12]
