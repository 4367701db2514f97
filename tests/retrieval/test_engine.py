"""encode.engine: ray — the same vectors as the local engine, written to the same cache, resumable.

Every test shares one local Ray cluster (conftest.ray_cluster, 2 CPUs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO, make_png, with_corrupt_page
from lookalike.io.cache import Cache
from lookalike.retrieval import systems

BUILT_IN = ["ocr-minilm", "ocr-bm25", "caption-minilm", "appearance"]
SLOW = "tests/plugins/slow_pages.py:SlowPages"


def settings(names, batch_size=2, **own):
    return dict(ocr_engine="", device="cpu", batch_size=batch_size, workers=0, colpali_model="", colpali_family="",
                endpoint={}, settings=own, encoders=list(names))


def encode(units, folder, names, cache_dir, engine_name, log=None, **kw):
    """(vectors, table); the Ray engine's summary is appended to log when one is given."""
    got = systems.encode_units(units, folder, names, Cache(cache_dir), engine=engine_name, **settings(names, **kw))
    if log is not None and got.engine is not None:
        log.append(got.engine)
    return got.vectors, got.table


def same(a, b) -> bool:
    if a.kind == "text":
        return list(a.data) == list(b.data)
    return np.asarray(a.data).tobytes() == np.asarray(b.data).tobytes()


def test_the_ray_engine_gives_the_local_engines_vectors_bit_for_bit(tiny_pages, tmp_path, ray_cluster):
    units, folder = tiny_pages
    local, _ = encode(units, folder, BUILT_IN, tmp_path / "local", "local")
    log: list = []
    ray_out, table = encode(units, folder, BUILT_IN, tmp_path / "ray", "ray", log)
    for name in BUILT_IN:
        assert ray_out[name].ids == local[name].ids
        assert ray_out[name].encoder_id == local[name].encoder_id
        assert same(ray_out[name], local[name]), name
    # everything was computed on Ray: the driver's pass only read the cache
    assert table["cache_misses"].sum() == 0
    summary = log[0]
    ocr_row = summary[summary["stage"] == "ocr"].iloc[0]
    assert (ocr_row["items"], ocr_row["computed"]) == (3, 3)
    enc_rows = summary[summary["stage"] == "encode"].set_index("encoder")
    assert enc_rows.loc["ocr-minilm", "items"] == 2                 # batches of 2 over 3 pages
    assert enc_rows.loc["ocr-minilm", "computed"] == 3
    assert enc_rows.loc["appearance", "computed"] == 3
    # a rerun is free: no OCR, nothing computed
    rerun: list = []
    encode(units, folder, BUILT_IN, tmp_path / "ray", "ray", rerun)
    assert rerun[0]["computed"].sum() == 0
    assert rerun[0]["items"].sum() == 0            # every encoder said it lacks nothing: no Ray stage ran


def test_on_a_partly_filled_cache_ray_batches_only_what_is_missing_as_the_local_engine(tiny_pages, tmp_path,
                                                                                      ray_cluster):
    units, folder = tiny_pages
    for cache in ("local", "ray"):                  # the same two of three pages already held by both
        encode(units.iloc[[0, 2]], folder, BUILT_IN, tmp_path / cache, "local")
    local, _ = encode(units, folder, BUILT_IN, tmp_path / "local", "local", batch_size=1)
    log: list = []
    ray_out, _ = encode(units, folder, BUILT_IN, tmp_path / "ray", "ray", log, batch_size=1)
    rows = log[0].set_index(["stage", "encoder"])
    assert rows["items"].tolist() == [1, 1, 1, 1]   # OCR of doc:2, then one batch per encoder
    for name in BUILT_IN:
        assert same(ray_out[name], local[name]), name


def test_a_corrupt_page_is_reported_and_skipped_on_ray_as_locally(tiny_pages, tmp_path, ray_cluster):
    units, folder = tiny_pages
    bad = with_corrupt_page(units, tmp_path)
    kw = {"slow-pages": {"seconds": 0.0}}
    local, _ = encode(bad, folder, [SLOW], tmp_path / "local", "local", **kw)
    ray_out, _ = encode(bad, folder, [SLOW], tmp_path / "ray", "ray", **kw)
    assert ray_out["slow-pages"].ids == local["slow-pages"].ids == list(units["unit_id"])
    assert [u for u, _ in ray_out["slow-pages"].stats["failed"]] == ["doc:9"]
    assert same(ray_out["slow-pages"], local["slow-pages"])


def test_an_encoder_that_is_not_distributable_runs_in_the_driver(tiny_pages, tmp_path, ray_cluster):
    units, folder = tiny_pages
    names = ["examples/plugin_encoder/hashed_ocr.py:HashedOcr"]
    log: list = []
    ray_out, _ = encode(units, folder, names, tmp_path / "ray", "ray", log)
    local, _ = encode(units, folder, names, tmp_path / "local", "local")
    assert log[0].iloc[0]["note"].startswith("runs in the driver")
    assert same(ray_out["hashed-ocr"], local["hashed-ocr"])


def test_an_unknown_engine_is_refused(tiny_pages, tmp_path):
    units, folder = tiny_pages
    with pytest.raises(Exception, match="encode.engine: 'spark' is not one of local, ray"):
        encode(units, folder, ["appearance"], tmp_path / "c", "spark")


DRIVER = textwrap.dedent("""
    import sys
    import pandas as pd
    from lookalike.io.cache import Cache
    from lookalike.retrieval import systems
    units = pd.read_csv(sys.argv[1], dtype=str)
    names = [sys.argv[4]]
    kw = dict(ocr_engine="", device="cpu", batch_size=1, workers=0, colpali_model="", colpali_family="",
              endpoint={}, settings={"slow-pages": {"seconds": 0.6}}, encoders=names)
    systems.encode_units(units, sys.argv[2], names, Cache(sys.argv[3]), engine="ray", ray_address=sys.argv[5], **kw)
    print("finished")
""")


def _entries(cache_dir: Path) -> int:
    return sum(1 for _ in cache_dir.rglob("*.npy"))


@pytest.mark.slow
def test_an_encode_killed_midway_resumes_with_only_the_missing_units(tmp_path, ray_cluster):
    folder = tmp_path / "pages"
    rows = []
    for i in range(12):
        make_png(folder / f"p{i}.png", color=(20 * i, 255 - 20 * i, 90), size=(40, 30))
        rows.append({"unit_id": f"doc:{i + 1}", "image_path": f"p{i}.png"})
    units = pd.DataFrame(rows)
    units.to_csv(tmp_path / "units.csv", index=False)
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"), TQDM_DISABLE="1")
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "units.csv"), str(folder), str(cache_dir),
                             SLOW, ray_cluster], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 180
    while _entries(cache_dir) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
    os.kill(proc.pid, signal.SIGKILL)                 # the driver dies mid-way; Ray reaps its actors
    proc.wait()
    held, stable_since = _entries(cache_dir), time.time()
    while time.time() - stable_since < 3:             # wait until no orphaned actor still writes
        time.sleep(0.2)
        now = _entries(cache_dir)
        if now != held:
            held, stable_since = now, time.time()
    assert 3 <= held < 12, f"the kill came too late to test a resume: {held} of 12 pages were cached"

    log: list = []
    kw = {"slow-pages": {"seconds": 0.6}}       # the killed run's setting (it is part of the cache key)
    out, table = encode(units, folder, [SLOW], cache_dir, "ray", log, batch_size=1, **kw)
    assert log[0].iloc[0]["computed"] == 12 - held    # only the missing pages were encoded
    assert table.iloc[0]["cache_misses"] == 0
    complete, _ = encode(units, folder, [SLOW], tmp_path / "fresh", "local", batch_size=1, **kw)
    assert same(out["slow-pages"], complete["slow-pages"])


def test_ray_ci_is_the_ci_run_plus_the_engine():
    """params/examples/ray-ci.yaml differs from params/ci.yaml only in its name, title and engine."""
    from lookalike import params as P

    ci = P.load_params(REPO / "params" / "ci.yaml")
    ray_ci = P.load_params(REPO / "params" / "examples" / "ray-ci.yaml")
    for key in ("run", "title"):
        ci.pop(key), ray_ci.pop(key)
    assert ray_ci["encode"].pop("engine") == "ray" and ci["encode"].pop("engine") == "local"
    assert ray_ci == ci


@pytest.mark.slow
def test_stage_02_on_ray_writes_the_local_engines_tables_byte_for_byte(ci_run, tmp_path, ray_cluster):
    """Stages 01-02 of ray-ci, connected to the session's cluster, with a cache that holds only the pages'
    OCR text (so Ray computes every page's vectors), against the CI run's local-engine tables, runs and
    vectors. OCR itself on Ray against the local engine, bit for bit, is the tiny pages' test above: here
    it would be 152 pages of tesseract again, the longest part of the test."""
    import yaml

    from lookalike.cli import run
    from lookalike.io.cache import image_sha256
    from lookalike.retrieval.encoders import ocr

    units = pd.read_csv(ci_run / "tables" / "units.csv", dtype=str, keep_default_na=False)
    pages = [systems.resolve_image(p, ci_run) for p in units["image_path"]]
    texts, _ = ocr.ocr_many([str(p) for p in pages], None, Cache(), progress=False)   # the ci run's, cached
    seeded, eid = Cache(tmp_path / "cache"), ocr.engine_id(ocr.default_engine())
    for page, text in zip(pages, texts):
        seeded.put_text(image_sha256(page), eid, text)
    spec = yaml.safe_load((REPO / "params" / "examples" / "ray-ci.yaml").read_text(encoding="utf-8"))
    spec["encode"].update(ray_address=ray_cluster, cache_dir=str(tmp_path / "cache"))
    params = tmp_path / "ray-ci.yaml"
    params.write_text(yaml.safe_dump(spec), encoding="utf-8")
    out = run.execute(params, out_root=tmp_path / "out", stages=["01_stratify_corpus", "02_encode"],
                      log=lambda *_: None)
    timing = pd.read_csv(out / "timings" / "02_engine_ray.csv")
    assert timing.loc[timing["stage"] == "ocr", "computed"].sum() == 0         # the seeded texts were read
    computed = timing[timing["stage"] == "encode"].set_index("encoder")["computed"]
    assert computed["ocr-minilm"] == computed["appearance"] == len(units) and computed["caption-minilm"] > 0
    compared = 0
    for sub in ("tables", "runs", "vectors"):
        for path in sorted((out / sub).iterdir()):
            assert path.read_bytes() == (ci_run / sub / path.name).read_bytes(), f"{sub}/{path.name} differs"
            compared += 1
    assert compared >= 10
