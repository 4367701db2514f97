"""ColPali-family encoders through colpali-engine, from a local model folder or a hub id on a
machine that can reach a hub: the multi-vector ``colpali`` (ColPali, ColQwen2, ColIdefics3,
ColModernVBert) and the single-vector ``bi`` (BiPali, BiQwen2, BiIdefics3, BiModernVBert: one
pooled vector per page and per query), so single- and multi-vector retrievers compare on one corpus.

No weights ship with any package and no hub is reachable on the project's build machines, so the
path is tested with tiny randomly initialised models saved to a temporary folder at test time.
Optional token pooling (``pool_factor`` > 1) merges each page's patch vectors by hierarchical
clustering (colpali-engine's HierarchicalTokenPooler) to cut storage and MaxSim time.
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

FAMILIES = {
    # family: (model class, processor class, config model_type values that select it)
    "ColPali": ("ColPali", "ColPaliProcessor", ("paligemma",)),
    "ColQwen2": ("ColQwen2", "ColQwen2Processor", ("qwen2_vl",)),
    "ColIdefics3": ("ColIdefics3", "ColIdefics3Processor", ("idefics3",)),
    "ColModernVBert": ("ColModernVBert", "ColModernVBertProcessor", ("modernvbert",)),
}

BI_FAMILIES = {
    # the Bi* processors mirror the Col* ones; colpali-engine 0.3.18's Bi* processor classes lose their
    # tokenizer when loaded under transformers 5 (their __init__ names no attributes), so the family's
    # Col* processor class loads the same files
    "BiPali": ("BiPali", "ColPaliProcessor", ("paligemma",)),
    "BiQwen2": ("BiQwen2", "ColQwen2Processor", ("qwen2_vl",)),
    "BiIdefics3": ("BiIdefics3", "ColIdefics3Processor", ("idefics3",)),
    "BiModernVBert": ("BiModernVBert", "ColModernVBertProcessor", ("modernvbert",)),
}

HOW_TO = ("set encode.colpali_model to a local folder holding a ColPali-family model (config.json, weights, "
          "processor files), e.g. one downloaded with `huggingface-cli download vidore/colqwen2-v1.0` on a "
          "machine with internet, or to a hub id on a machine that can reach the hub")


def detect_family(model_dir: Path, families: dict = FAMILIES, setting: str = "encode.colpali_family") -> str:
    """The family of a saved model: its architectures entry (BiPali, ColQwen2, ...) first, then its
    config's model_type."""
    cfg_path = Path(model_dir) / "config.json"
    if not cfg_path.is_file():
        raise EncodeError(f"{model_dir}: no config.json; {HOW_TO}")
    cfg = json.loads(cfg_path.read_text())
    model_type = cfg.get("model_type", "")
    archs = set(cfg.get("architectures") or [])
    for family, (model_cls, _, _) in families.items():
        if model_cls in archs:
            return family
    for family, (_, _, types) in families.items():
        if model_type in types:
            return family
    label = "ColPali" if families is FAMILIES else "Bi*"
    raise EncodeError(f"{model_dir}: cannot tell the {label} family from config.json (model_type {model_type!r}, "
                      f"architectures {sorted(archs)}); set {setting} to one of {', '.join(families)}")


class ColPaliEncoder(Encoder):
    """Page pixels -> ColPali-family multi-vectors (one vector per image patch / token)."""

    name, provenance, kind = "colpali", "pixels", "multi"
    families, family_setting = FAMILIES, "encode.colpali_family"
    how_to = HOW_TO

    def __init__(self, model: str = "", family: str = "", pool_factor: int = 1, **kw):
        if not model:
            raise EncodeError(f"the {self.name} encoder needs a model: {self.how_to}")
        local = Path(model)
        if local.exists():
            family = family or detect_family(local, self.families, self.family_setting)
        elif not family:
            raise EncodeError(f"model {model!r} is not a local folder; {self.how_to} (and set {self.family_setting} "
                              "for a hub id)")
        if family not in self.families:
            raise EncodeError(f"unknown {self.name} family {family!r}; expected one of {', '.join(self.families)}")
        if self.kind == "multi":
            super().__init__(model=str(model), family=family, pool_factor=pool_factor, **kw)
        else:
            if pool_factor != 1:
                raise EncodeError(f"the {self.name} encoder has one vector per page: pool_factor does not apply")
            super().__init__(model=str(model), family=family, **kw)
        self.family = family
        self.revision = _model_revision(local) if local.exists() else "hub"
        self._model = None
        self._processor = None

    def load(self):
        """The model and its processor for this family, loaded once (a local folder or a hub name; offline here)."""
        if self._model is None:
            import colpali_engine.models as cm
            import torch

            model_cls, proc_cls, _ = self.families[self.family]
            path = self.settings["model"]
            local = Path(path).exists()
            dtype = torch.bfloat16 if self.dtype == "bfloat16" else torch.float32
            try:
                self._model = getattr(cm, model_cls).from_pretrained(
                    path, dtype=dtype, local_files_only=local, device_map=self.device).eval()
                self._processor = getattr(cm, proc_cls).from_pretrained(path, local_files_only=local)
            except OSError as exc:
                raise EncodeError(f"cannot load {self.family} model from {path!r} ({exc}); {self.how_to}") from exc
            except AttributeError as exc:
                # colpali-engine 0.3.18's BiQwen2.from_pretrained fails under transformers 5 this way
                raise EncodeError(f"colpali-engine cannot load {self.family} from {path!r} with this transformers "
                                  f"version ({exc}); a defect of the installed colpali-engine, not of the model "
                                  "files") from exc
        return self._model, self._processor

    def _embed(self, batch_inputs) -> list[np.ndarray]:
        import torch

        model, _ = self.load()
        with torch.no_grad():
            batch_inputs = {k: v.to(self.device) for k, v in batch_inputs.items()}
            out = model(**batch_inputs)
        if out.dim() == 2:                      # single-vector (Bi*): one pooled vector per item
            return [row.float().cpu().numpy() for row in out]
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
        """The page images' embeddings in batches of batch_size (pooled to the encoder's kind)."""
        _, processor = self.load()
        out = []
        for start in range(0, len(images), self.batch_size):
            batch = processor.process_images(list(images[start:start + self.batch_size]))
            out.extend(self._embed(batch))
        return self._pool(out)

    def pending(self, units: pd.DataFrame, base_dir: Path, cache) -> list[int]:
        """Positions of the units whose page vectors the cache does not hold."""
        return pending_pages(units, base_dir, cache, self.id)

    streams_to_store = True

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None,
                     store_dir: Path | None = None) -> Vectors:
        """store_dir (multi-vector only): stream the pages into a float16 PageStore there as they are
        encoded or read from the cache (retrieval.store), and return its pages read lazily — memory
        holds one batch, not the corpus."""
        if store_dir is not None and self.kind == "multi":
            from lookalike.retrieval.store import PageWriter

            writer = PageWriter(store_dir, encoder_id=self.id)
            ids, _, stats = cached_pages(self, units, base_dir, cache or Cache(), self.encode_images, sink=writer)
            return Vectors(self.id, self.provenance, ids, writer.close().pages(), self.kind, stats)
        ids, vecs, stats = cached_pages(self, units, base_dir, cache or Cache(), self.encode_images)
        return Vectors(self.id, self.provenance, ids, self._data(vecs), self.kind, stats)

    def _data(self, vecs: list[np.ndarray]):
        if self.kind == "multi":
            return vecs
        return np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, 0), np.float32)

    def _texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        _, processor = self.load()
        out = []
        for start in range(0, len(texts), self.batch_size):
            batch = processor.process_queries(list(texts[start:start + self.batch_size]))
            out.extend(self._embed(batch))
        return out

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        """The questions through the model's query tower."""
        return Vectors(self.id, "query-text", list(ids), self._data(self._texts(texts)), self.kind)


class BiEncoder(ColPaliEncoder):
    """Page pixels -> one pooled vector per page (colpali-engine's Bi* models); queries through the
    model's query tower. Caption text goes through the same tower (``encode_captions``): the leak
    ablation's caption index for this model."""

    name, provenance, kind = "bi", "pixels", "single"
    families, family_setting = BI_FAMILIES, "encode.settings.bi.family"
    how_to = ("set encode.settings.bi.model to a local folder holding a colpali-engine Bi* model (BiPali, BiQwen2, "
              "BiIdefics3, BiModernVBert: config.json, weights, processor files), or to a hub id on a machine "
              "that can reach the hub (with encode.settings.bi.family)")
    captions = True

    def encode_captions(self, texts: Sequence[str], ids: Sequence[str], cache: Cache | None = None) -> Vectors:
        """Caption text through the query tower: the leak ablation's caption index for this model."""
        return Vectors(self.id, "caption-text", list(ids), self._data(self._texts(texts)), self.kind)


def _model_revision(folder: Path) -> str:
    """Hash of the folder's config and weight file names/sizes/mtimes: a changed model never hits old cache."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(folder)}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:12]
