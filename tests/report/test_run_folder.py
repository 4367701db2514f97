"""Charts saved with Vega inlined take vl_convert's JavaScript bundle from the cache folder: the
same HTML, byte for byte, without building the bundle again in every stage's process."""

import altair as alt
import pandas as pd
import pytest
import vl_convert as vlc

from lookalike.report import run_folder


def _chart():
    return alt.Chart(pd.DataFrame({"x": [1, 2, 3], "y": [3, 1, 2]})).mark_line().encode(x="x", y="y")


def test_the_bundle_is_built_once_then_read_from_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKALIKE_CACHE", str(tmp_path / "cache"))
    real = vlc.javascript_bundle
    run_folder.save_chart(_chart(), tmp_path / "first", "c")
    first = (tmp_path / "first" / "figures" / "c.html").read_bytes()
    assert vlc.javascript_bundle is real                      # put back after the save
    files = sorted(p.suffix for p in (tmp_path / "cache" / "vega-bundles").iterdir())
    assert files == [".js", ".sha256"]
    assert b"https://" not in first.split(b"<script", 1)[0]    # still inlined: nothing fetched

    def must_not_build(*args, **kwargs):
        raise AssertionError("the bundle was built again")

    monkeypatch.setattr(vlc, "javascript_bundle", must_not_build)
    run_folder.save_chart(_chart(), tmp_path / "second", "c")
    assert (tmp_path / "second" / "figures" / "c.html").read_bytes() == first


def test_a_damaged_bundle_on_disk_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKALIKE_CACHE", str(tmp_path / "cache"))
    run_folder.save_chart(_chart(), tmp_path / "first", "c")
    first = (tmp_path / "first" / "figures" / "c.html").read_bytes()
    js = next((tmp_path / "cache" / "vega-bundles").glob("*.js"))
    js.write_text("/* truncated */", encoding="utf-8")
    built = []
    real = vlc.javascript_bundle

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(vlc, "javascript_bundle", counting)
    run_folder.save_chart(_chart(), tmp_path / "second", "c")
    assert built == [1]
    assert (tmp_path / "second" / "figures" / "c.html").read_bytes() == first
    assert "truncated" not in js.read_text(encoding="utf-8")  # the copy on disk is whole again


@pytest.mark.parametrize("snippet", ["window.x = 1;"])
def test_a_call_with_a_snippet_is_not_served_from_disk(tmp_path, monkeypatch, snippet):
    monkeypatch.setenv("LOOKALIKE_CACHE", str(tmp_path / "cache"))
    calls = []
    monkeypatch.setattr(vlc, "javascript_bundle", lambda *a, **k: calls.append((a, k)) or "js")
    with run_folder._vega_bundle_from_disk(vlc):
        assert vlc.javascript_bundle(snippet, vl_version="v6") == "js"
    assert calls == [((snippet,), {"vl_version": "v6"})]
    assert not (tmp_path / "cache" / "vega-bundles").exists()
