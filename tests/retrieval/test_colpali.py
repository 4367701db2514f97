"""The colpali encoder path on every family, with tiny random models built at test time."""

import numpy as np
import pytest
import tiny_colpali
import torch
from lookalike.io.cache import Cache
from lookalike.retrieval import encoders
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval.encoders.colpali import detect_family
from PIL import Image

from conftest import with_corrupt_page

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("family", tiny_colpali.FAMILIES)
def test_family_encodes_offline_and_round_trips(family, tmp_path, tiny_pages):
    units, root = tiny_pages
    model, proc = tiny_colpali.save(family, tmp_path / "model")
    assert detect_family(tmp_path / "model") == family
    # what the in-memory model gives, before any save/load
    images = [Image.open(root / p).convert("RGB") for p in units["image_path"]]
    with torch.no_grad():
        batch = proc.process_images(images)
        direct = model(**batch)
    mask = batch["attention_mask"].bool()
    expected = [direct[i][mask[i]].numpy() for i in range(len(images))]

    enc = encoders.make_encoder("colpali", model=str(tmp_path / "model"), device="cpu", batch_size=2, progress=False)
    cache = Cache(tmp_path / "cache")
    vecs = enc.encode_units(units, root, cache)
    assert vecs.kind == "multi" and vecs.provenance == "pixels" and vecs.dim == 128
    for got, want in zip(vecs.data, expected):
        np.testing.assert_allclose(got, want, atol=1e-5)
    again = enc.encode_units(units, root, cache)
    assert again.stats["computed"] == 0 and again.stats["cached"] == 3

    queries = enc.encode_queries(["revenue by segment", "quarter"], ["q1", "q2"])
    index = retrieve.MultiVectorIndex().add(vecs)
    ours = index.scores(queries)
    ref = proc.score_multi_vector([torch.from_numpy(q) for q in queries.data],
                                  [torch.from_numpy(p) for p in vecs.data]).numpy()
    assert np.abs(ours - ref).max() < 1e-4
    run = index.search(queries, k=2)
    assert len(run) == 4 and set(run["query_id"]) == {"q1", "q2"}


def test_token_pooling_shrinks_pages(tmp_path, tiny_pages):
    units, root = tiny_pages
    tiny_colpali.save("ColIdefics3", tmp_path / "model")
    plain = encoders.make_encoder("colpali", model=str(tmp_path / "model"), device="cpu", progress=False)
    pooled = encoders.make_encoder("colpali", model=str(tmp_path / "model"), device="cpu", pool_factor=2, progress=False)
    assert plain.id != pooled.id
    a = plain.encode_units(units, root, Cache(tmp_path / "c1"))
    b = pooled.encode_units(units, root, Cache(tmp_path / "c2"))
    assert all(len(y) < len(x) for x, y in zip(a.data, b.data))


def test_unknown_family_and_missing_folder(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(encoders.EncodeError, match="cannot tell the ColPali family"):
        encoders.make_encoder("colpali", model=str(tmp_path))
    with pytest.raises(encoders.EncodeError, match="set encode.colpali_family"):
        encoders.make_encoder("colpali", model="vidore/colqwen2-v1.0")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("family", tiny_colpali.FAMILIES)
def test_auto_device_uses_cuda_bf16_and_agrees_with_cpu(family, tmp_path, tiny_pages):
    units, root = tiny_pages
    tiny_colpali.save(family, tmp_path / "model")
    gpu = encoders.make_encoder("colpali", model=str(tmp_path / "model"), device="auto", progress=False)
    assert (gpu.device, gpu.dtype) == ("cuda", "bfloat16")
    cpu = encoders.make_encoder("colpali", model=str(tmp_path / "model"), device="cpu", progress=False)
    a = gpu.encode_units(units, root, Cache(tmp_path / "g"))
    b = cpu.encode_units(units, root, Cache(tmp_path / "c"))
    for x, y in zip(a.data, b.data):
        assert x.shape == y.shape
        cos = (x * y).sum(axis=1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1) + 1e-12)
        assert cos.min() > 0.98                       # bf16 vs fp32 on the same weights


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_maxsim_on_cuda_equals_cpu():
    rng = np.random.default_rng(3)
    qs = [rng.standard_normal((int(rng.integers(3, 20)), 64)).astype(np.float32) for _ in range(9)]
    ps = [rng.standard_normal((int(rng.integers(10, 300)), 64)).astype(np.float32) for _ in range(40)]
    assert np.abs(retrieve.maxsim(qs, ps, 8, device="cuda") - retrieve.maxsim(qs, ps, 8)).max() < 1e-3


def test_a_corrupt_page_is_reported_and_skipped_not_the_whole_pass(tmp_path, tiny_pages):
    units, root = tiny_pages
    tiny_colpali.save("ColIdefics3", tmp_path / "model")
    more = with_corrupt_page(units, tmp_path, b"\x89PNG truncated")
    enc = encoders.make_encoder("colpali", model=str(tmp_path / "model"), device="cpu", progress=False)
    vecs = enc.encode_units(more, root, Cache(tmp_path / "c"))
    assert vecs.ids == list(units["unit_id"]) and len(vecs.data) == 3
    assert [u for u, _ in vecs.stats["failed"]] == ["doc:9"]
