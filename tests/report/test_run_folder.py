"""Charts saved with Vega inlined take vl_convert's JavaScript bundle from the cache folder: the
same HTML, byte for byte, without building the bundle again in every stage's process. A run folder has one
writer at a time, and its tables and runs are written whole or not at all."""

from pathlib import Path

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


# ------------------------------------------------------------------ one writer, whole files

def _hold_lock(run_dir: Path):
    """A second process holding the run folder's lock (as a running `lookalike run` does), until killed."""
    import subprocess
    import sys
    import time

    code = ("import sys, time; from lookalike.report import run_folder\n"
            f"with run_folder.one_writer({str(run_dir)!r}):\n    print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    time.sleep(0.05)
    return proc


def test_a_second_writer_of_a_run_folder_is_refused_naming_the_folder_and_the_holder(tmp_path):
    from lookalike.report import run_folder

    proc = _hold_lock(tmp_path)
    try:
        with pytest.raises(run_folder.RunFolderBusy) as busy:
            with run_folder.one_writer(tmp_path):
                pytest.fail("a second writer got the lock")
        assert str(tmp_path) in str(busy.value) and f"process {proc.pid}" in str(busy.value)
    finally:
        proc.kill()
        proc.wait()
    # killed, the holder released the lock as it died; its name left in the file says it did not finish
    with run_folder.one_writer(tmp_path) as stale:
        assert stale.startswith(f"process {proc.pid} ")
    with run_folder.one_writer(tmp_path) as stale:       # a run that ended (well or not) leaves none
        assert stale == ""


def test_a_table_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A full disk (or a kill) while a table is written leaves the old table as it was and no partial file:
    the table is written beside its place and renamed over it."""
    from lookalike.report import run_folder

    old = pd.DataFrame({"system": ["a"], "value": [0.5]})
    path = run_folder.write_table(old, tmp_path, "headline")
    before = path.read_bytes()

    def full_disk(self, path_or_buf=None, *args, **kwargs):
        Path(path_or_buf).write_text("system,val")             # half a table, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_disk)
    with pytest.raises(OSError, match="No space left"):
        run_folder.write_table(pd.DataFrame({"system": ["b"], "value": [0.9]}), tmp_path, "headline")
    assert path.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == ["headline.csv"]


def test_an_exported_run_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from lookalike.eval import ranking

    path = tmp_path / "a.run"
    ranking.write_run(pd.DataFrame({"query_id": ["q1"], "unit_id": ["u1"], "score": [1.0]}), path)
    before = path.read_bytes()
    big = pd.DataFrame({"query_id": ["q1"] * 3, "unit_id": ["u1", "u2", "u3"], "score": [3.0, 2.0, 1.0]})
    import os

    # the disk fills as the finished file is put in place (a file-size limit hits the same way)
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(27, "File too large")))
    with pytest.raises(OSError, match="File too large"):
        ranking.write_run(big, path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["a.run"]
