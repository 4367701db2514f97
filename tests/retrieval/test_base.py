"""The encoder base (retrieval.encoders.base): Vectors saved and loaded, and the device auto picks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lookalike.retrieval.encoders.base import Vectors
from tests.retrieval.test_store import half, stored


def test_vectors_save_and_load_round_trip(tmp_path):
    single = Vectors("e", "pixels", ["a", "b"], np.arange(6, dtype=np.float32).reshape(2, 3))
    multi = Vectors("m", "pixels", ["a", "b"], [np.ones((2, 3), np.float32), np.zeros((4, 3), np.float32)], "multi")
    text = Vectors("t", "pixels", ["a"], ["some text"], "text")
    for v in (single, multi, text):
        back = Vectors.load(v.save(tmp_path, v.encoder_id))
        assert (back.ids, back.provenance, back.kind, back.encoder_id) == (v.ids, v.provenance, v.kind, v.encoder_id)
    np.testing.assert_array_equal(Vectors.load(tmp_path / "m.npz").data[1], multi.data[1])


def test_auto_device_without_an_nvidia_driver_is_cpu_and_asks_torch_nothing(monkeypatch):
    # no libcuda.so.1: torch.cuda.is_available() could only say False, so torch is not asked (nor
    # imported: 2-2.5 s in every stage that makes an encoder over a warm cache)
    import ctypes
    import sys

    from lookalike.retrieval.encoders import base

    def no_driver(name, *a, **k):
        raise OSError(f"{name}: cannot open shared object file")

    def must_not_ask():
        raise AssertionError("torch was asked")

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    monkeypatch.setattr(torch.cuda, "is_available", must_not_ask)
    assert base.resolve_device("auto") == ("cpu", "float32")
    assert base.resolve_device("cpu") == ("cpu", "float32")
    with pytest.raises(AssertionError, match="torch was asked"):
        base.resolve_device("cuda")                 # an explicit GPU request is still checked with torch


@pytest.mark.parametrize("platform, cuda", [("linux", True), ("linux", False), ("win32", True)])
def test_auto_device_asks_torch_when_a_driver_may_be_there(monkeypatch, platform, cuda):
    # the driver library loads (or the platform is not Linux): torch decides, as before
    import ctypes
    import sys

    from lookalike.retrieval.encoders import base

    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: object())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert base.resolve_device("auto") == (("cuda", "bfloat16") if cuda else ("cpu", "float32"))


def test_a_stage_process_making_a_cpu_encoder_does_not_import_torch_here():
    # on this machine (no NVIDIA driver) making an encoder over a warm cache needs no torch
    import ctypes
    import subprocess
    import sys

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        pass
    else:
        pytest.skip("an NVIDIA driver is present: torch decides the device")
    code = ("import sys; from lookalike.retrieval import systems; "
            "systems.make_encoder('caption-minilm', device='auto'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr


def test_saved_stored_vectors_name_their_store_and_load_lazily(tmp_path):
    rng = np.random.default_rng(1)
    pages = [rng.standard_normal((int(n), 8)).astype(np.float32) for n in (3, 1, 4)]
    vecs = stored(tmp_path / "vectors", pages, name="toy.pages")
    path = vecs.save(tmp_path / "vectors", "toy")
    with np.load(path) as z:
        assert "data" not in z.files                                 # the vectors stay in the store
    back = Vectors.load(path)
    assert back.stored and back.ids == vecs.ids
    for a, b in zip(back.data, half(pages)):
        np.testing.assert_array_equal(a, b)
    # saved elsewhere: the store is copied beside the npz, page by page
    back.save(tmp_path / "other", "toy")
    again = Vectors.load(tmp_path / "other" / "toy.npz")
    assert again.data.store.folder == tmp_path / "other" / "toy.pages"
    np.testing.assert_array_equal(again.data[2], back.data[2])
