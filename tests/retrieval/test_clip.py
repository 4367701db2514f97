"""Dual image-text encoders (retrieval.encoders.clip) on tiny random CLIP, SigLIP and SigLIP-2 models built at test time: images, captions and questions in one space offline, a corrupt page reported, the model checked."""

from __future__ import annotations

import numpy as np
import pytest
from tests import tiny_colpali
import torch
from lookalike.io.cache import Cache
from lookalike.retrieval import encoders
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval.encoders.base import EncodeError, Vectors
from PIL import Image
from tests.conftest import with_corrupt_page

pytestmark = pytest.mark.slow


def _direct_clip(model, proc, images, texts, siglip):
    with torch.no_grad():
        img = model.get_image_features(**proc(images=images, return_tensors="pt"))
        t = proc(text=texts, padding="max_length" if siglip else True, truncation=True, max_length=64,
                 return_tensors="pt")
        txt = model.get_text_features(**{k: v for k, v in t.items() if k in ("input_ids", "attention_mask")})
    img, txt = getattr(img, "pooler_output", img), getattr(txt, "pooler_output", txt)
    return (torch.nn.functional.normalize(img, dim=-1).numpy(), torch.nn.functional.normalize(txt, dim=-1).numpy())


@pytest.mark.parametrize("kind", tiny_colpali.DUAL_KINDS)
def test_clip_encodes_images_captions_and_queries_in_one_space_offline(kind, tmp_path, tiny_pages):
    units, root = tiny_pages
    model, _ = tiny_colpali.save_dual(kind, tmp_path / "model")
    import transformers as tf

    proc = tf.AutoProcessor.from_pretrained(tmp_path / "model", local_files_only=True)   # as a user loads it
    images = [Image.open(root / p).convert("RGB") for p in units["image_path"]]
    want_img, want_txt = _direct_clip(model, proc, images, ["revenue by segment", "quarter"], kind != "clip")

    enc = encoders.make_encoder("clip", model=str(tmp_path / "model"), device="cpu", batch_size=2, progress=False)
    assert encoders.has_captions("clip") and enc.provenance == "pixels"
    cache = Cache(tmp_path / "cache")
    vecs = enc.encode_units(units, root, cache)
    assert vecs.kind == "single" and vecs.provenance == "pixels" and vecs.ids == list(units["unit_id"])
    np.testing.assert_allclose(vecs.data, want_img, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vecs.data, axis=1), 1.0, atol=1e-5)
    again = enc.encode_units(units, root, cache)
    assert again.stats["computed"] == 0 and again.stats["cached"] == 3
    np.testing.assert_array_equal(again.data, vecs.data)

    queries = enc.encode_queries(["revenue by segment", "quarter"], ["q1", "q2"])
    np.testing.assert_allclose(queries.data, want_txt, atol=1e-5)
    captions = enc.encode_captions(["revenue by segment", "quarter"], ["doc:1", "doc:2"])
    assert captions.provenance == "caption-text"
    np.testing.assert_array_equal(captions.data, queries.data)      # the same text tower: one space
    # save -> load: the same vectors again
    vecs.save(tmp_path / "v", "clip")
    np.testing.assert_array_equal(Vectors.load(tmp_path / "v" / "clip.npz").data, vecs.data)
    run = retrieve.DenseIndex(accepts=("pixels",)).add(vecs).search(queries, k=3)
    assert len(run) == 6


def test_clip_reports_a_corrupt_page_and_encodes_the_rest(tmp_path, tiny_pages):
    units, root = tiny_pages
    tiny_colpali.save_dual("clip", tmp_path / "model")
    more = with_corrupt_page(units, tmp_path)
    enc = encoders.make_encoder("clip", model=str(tmp_path / "model"), device="cpu", progress=False)
    vecs = enc.encode_units(more, root, Cache(tmp_path / "c"))
    assert vecs.ids == list(units["unit_id"])
    assert [u for u, _ in vecs.stats["failed"]] == ["doc:9"] and "bad.png" in vecs.stats["failed"][0][1]
    # the checked output accepts what the encoder reported as failed, and nothing else
    encoders.checked(vecs, list(more["unit_id"]), "clip")
    with pytest.raises(EncodeError, match="missing"):
        encoders.checked(Vectors(vecs.encoder_id, "pixels", vecs.ids[:2], vecs.data[:2]), list(units["unit_id"]), "clip")


def test_clip_needs_a_model_and_a_dual_model(tmp_path):
    with pytest.raises(EncodeError, match="encode.settings.clip.model"):
        encoders.make_encoder("clip", device="cpu")
    tiny_colpali.save("ColIdefics3", tmp_path / "col")
    enc = encoders.make_encoder("clip", model=str(tmp_path / "col"), device="cpu", progress=False)
    with pytest.raises(EncodeError):
        enc.encode_queries(["x"], ["q"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["clip", "siglip2"])
def test_clip_on_cuda_bf16_agrees_with_cpu(kind, tmp_path, tiny_pages):
    units, root = tiny_pages
    tiny_colpali.save_dual(kind, tmp_path / "model")
    gpu = encoders.make_encoder("clip", model=str(tmp_path / "model"), device="auto", progress=False)
    assert (gpu.device, gpu.dtype) == ("cuda", "bfloat16")
    cpu = encoders.make_encoder("clip", model=str(tmp_path / "model"), device="cpu", progress=False)
    a = gpu.encode_units(units, root, Cache(tmp_path / "g")).data
    b = cpu.encode_units(units, root, Cache(tmp_path / "c")).data
    assert ((a * b).sum(axis=1)).min() > 0.98
