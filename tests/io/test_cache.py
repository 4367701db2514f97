"""The content-hash cache (io.cache): a hit, a miss, and a corrupt entry computed again."""

from __future__ import annotations

import numpy as np
from lookalike.io.cache import Cache
from lookalike.retrieval import encoders


def test_cache_hit_miss_and_corruption(tmp_path, ci_units):
    units, base = ci_units
    cache = Cache(tmp_path / "cache")
    enc = encoders.make_encoder("appearance", progress=False)
    sub = units.head(3)
    first = enc.encode_units(sub, base, cache)
    assert first.stats["computed"] == 3
    again = enc.encode_units(sub, base, cache)
    assert again.stats == {**again.stats, "computed": 0, "cached": 3}
    np.testing.assert_array_equal(first.data, again.data)
    # truncate one entry and flip a byte in another: both are detected and recomputed
    files = sorted((tmp_path / "cache").rglob("*.npy"))
    files[0].write_bytes(files[0].read_bytes()[:20])
    blob = bytearray(files[1].read_bytes())
    blob[40] ^= 0xFF
    files[1].write_bytes(bytes(blob))
    third = enc.encode_units(sub, base, cache)
    assert third.stats["computed"] == 2 and cache.corrupt == 2
    np.testing.assert_array_equal(first.data, third.data)
