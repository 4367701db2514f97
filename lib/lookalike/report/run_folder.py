"""The run folder: where each kind of file a run writes goes, written so that the same params give the
same bytes, and the manifest that records them.

outputs/<run>/
  notebooks/   executed stage notebooks (papermill)
  html/        each notebook as HTML (report.site)
  tables/      CSV at full precision (parquet beside large ones)
  figures/     Altair charts: spec JSON + SVG + HTML with Vega inlined; other images as PNG
  headlines/   one JSON per stage: the sentence and figure index.html shows for it
  manifest.json  versions, params and hash, git revision, stage wall times, corpus fingerprint, and
               the sha256 of every file the figures rest on (lookalike audit checks them)
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from lookalike import params as P
from lookalike.io.cache import default_cache_dir

LARGE_TABLE_ROWS = 100_000
KEY_PACKAGES = ("lookalike", "numpy", "pandas", "pyarrow", "torch", "torchvision", "colpali-engine", "transformers",
                "papermill", "nbconvert", "nbval", "altair", "vl-convert-python", "pillow", "faiss-cpu", "scipy")


def run_dirs(run_dir: Path | str) -> dict[str, Path]:
    """The run folder's subfolders, created if missing: keys run, tables, figures, headlines, corpus."""
    run_dir = Path(run_dir)
    dirs = {"run": run_dir}
    for name in ("tables", "figures", "headlines", "corpus"):
        dirs[name] = run_dir / name
        dirs[name].mkdir(parents=True, exist_ok=True)
    return dirs


LOCK_NAME = ".lookalike-run.lock"


class RunFolderBusy(OSError):
    """Another process holds the run folder's lock: it is writing that run now."""


@contextmanager
def one_writer(run_dir: Path | str):
    """Hold the run folder's lock for a whole run: a second writer of the same folder is refused (naming the
    folder and the process that holds it) before it writes anything, so two runs with one name never mix
    their tables. The lock is the kernel's (flock on run_dir/.lookalike-run.lock): a run that is killed
    releases it as it dies. The file names its holder while held and is emptied when the run ends, so a
    holder's name found in it when the lock is free is a run that was killed — yielded (its words, or "")
    for the caller to say."""
    import fcntl
    import socket
    from datetime import UTC, datetime

    path = Path(run_dir) / LOCK_NAME
    fh = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip()
        fh.close()
        raise RunFolderBusy(f"{run_dir} is being written by another lookalike run ({holder or 'a running process'}); "
                            "nothing was written — wait for that run to end, or give this one another run name "
                            "or --out") from None
    try:
        fh.seek(0)
        stale = fh.read().strip()
        fh.seek(0)
        fh.truncate()
        fh.write(f"process {os.getpid()} on {socket.gethostname()}, started "
                 f"{datetime.now(UTC).isoformat(timespec='seconds')}\n")
        fh.flush()
        yield stale
    finally:
        # a run that ends, well or with an error, empties the file; only a killed one leaves its name there
        fh.seek(0)
        fh.truncate()
        fh.flush()
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


@contextmanager
def replacing(path: Path | str):
    """Write a file whole or not at all: yields a temporary path beside it (same folder, so the rename is
    atomic on one file system), renamed over path when the block ends without an error and removed when
    it ends with one — a full disk, a kill or an exception never leaves a half-written table in its place
    (the old file, if any, stays as it was)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_table(df: pd.DataFrame, run_dir: Path | str, name: str, sort_by: list[str] | None = None) -> Path:
    """Write tables/<name>.csv at full precision (and .parquet when large), rows in a fixed order.

    Floats are written with repr precision (17 significant digits round-trip), so a re-run with the
    same params gives the same bytes.
    """
    out = Path(run_dir) / "tables"
    out.mkdir(parents=True, exist_ok=True)
    if sort_by:
        df = df.sort_values(sort_by, kind="mergesort")
    df = df.reset_index(drop=True)
    path = out / f"{name}.csv"
    with replacing(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.17g", lineterminator="\n")
    if len(df) >= LARGE_TABLE_ROWS:
        with replacing(out / f"{name}.parquet") as tmp:
            df.to_parquet(tmp, index=False)
    return path


def save_chart(chart, run_dir: Path | str, name: str):
    """Save an Altair chart as figures/<name>.{vl.json,svg,html} (Vega inlined) and return an SVG display.

    The notebook shows the SVG, so neither the notebook nor its HTML export needs Vega from a CDN.
    """
    import vl_convert as vlc
    from IPython.display import SVG

    out = Path(run_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    spec = chart.to_dict()
    (out / f"{name}.vl.json").write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    svg = vlc.vegalite_to_svg(spec)
    (out / f"{name}.svg").write_text(svg, encoding="utf-8")
    with _vega_bundle_from_disk(vlc):
        chart.save(str(out / f"{name}.html"), inline=True)
    return SVG(svg)


@contextmanager
def _vega_bundle_from_disk(vlc):
    """While altair saves a chart with Vega inlined, vl_convert's JavaScript bundle comes from the
    cache folder. vl_convert builds the bundle (Vega, Vega-Lite, Vega-Embed: 0.9 MB) anew in every
    process, 1.5-2 s here, and each stage is a process. The bundle depends only on vl_convert's
    version and the Vega-Lite version asked for, which name the file; its sha256 is kept beside it,
    and a copy that does not match is built again. Only the plain call altair makes (no snippet) is
    served from disk; the original function is back when the block ends."""
    original = vlc.javascript_bundle

    def bundle(snippet=None, vl_version=None):
        if snippet is not None:
            return original(snippet, vl_version=vl_version)
        folder = default_cache_dir() / "vega-bundles"
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", f"vl-convert-{metadata.version('vl-convert-python')}-vega-lite-{vl_version}")
        js, digest = folder / f"{stem}.js", folder / f"{stem}.sha256"
        try:
            text = js.read_text(encoding="utf-8")
            if hashlib.sha256(text.encode("utf-8")).hexdigest() == digest.read_text(encoding="ascii").strip():
                return text
        except (OSError, UnicodeDecodeError):
            pass
        text = original(vl_version=vl_version)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for path, body in ((js, text), (digest, hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n")):
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                tmp.write_text(body, encoding="utf-8")
                os.replace(tmp, path)                 # whole files only, even with stages in parallel
        except OSError:
            pass                                      # an unwritable cache costs time, not the chart
        return text

    vlc.javascript_bundle = bundle
    try:
        yield
    finally:
        vlc.javascript_bundle = original


def save_image(img, run_dir: Path | str, name: str):
    """Save a PIL image as figures/<name>.png and return it for display."""
    out = Path(run_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    img.save(out / f"{name}.png", format="PNG")
    return img


def record_headline(run_dir: Path | str, stage: str, title: str, sentence: str, figure: str = "",
                    numbers: dict[str, Any] | None = None) -> None:
    """What index.html shows for a stage: a title, one sentence, a figure file (under figures/), key numbers."""
    out = Path(run_dir) / "headlines"
    out.mkdir(parents=True, exist_ok=True)
    record = {"stage": stage, "title": title, "sentence": sentence, "figure": figure, "numbers": numbers or {}}
    with replacing(out / f"{stage}.json") as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# ----------------------------------------------------------------------------- manifest

def _git_revision(repo: Path) -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    """Python's version and each key package's (or 'not installed'), recorded in the run's manifest."""
    out = {"python": platform.python_version()}
    for name in KEY_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


# what a run wrote that its figures rest on: the manifest records each file's sha256, and lookalike audit
# checks them (labels/ and labelling/ are left out: people label into a finished run)
RECORDED = ("summary.html", "index.html", "claims.json", "tables/*.csv", "runs/*.run", "runs_validated/*.run",
            "runs_hard/*.run", "qrels/*.qrels", "headlines/*.json", "html/*.html", "browse/**/*.html")


def recorded_files(run_dir: Path | str) -> dict[str, str]:
    """{path relative to the run folder: sha256 of its bytes} for every file RECORDED names."""
    run_dir = Path(run_dir)
    paths = sorted({p for pattern in RECORDED for p in run_dir.glob(pattern) if p.is_file()})
    return {p.relative_to(run_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def write_manifest(run_dir: Path | str, params: dict[str, Any], params_hash: str, timings: dict[str, float],
                   corpus_fingerprint: str, repo: Path | None, started: str, finished: str) -> Path:
    """manifest.json: the one place for timestamps, host, versions and revision (never in tables or cells)."""
    record = {
        "run": P.recorded(params).run,
        "started": started,
        "finished": finished,
        "host": {"machine": platform.machine(), "system": platform.system(), "node": platform.node()},
        # an installed package has no revision of its own (the version is under versions)
        "git_revision": _git_revision(repo) if repo is not None else "installed package",
        "params": params,
        "params_hash": params_hash,
        "stage_wall_seconds": {k: round(v, 2) for k, v in timings.items()},
        "corpus_fingerprint": corpus_fingerprint,
        "versions": package_versions(),
        "files": recorded_files(run_dir),
    }
    out = Path(run_dir) / "manifest.json"
    with replacing(out) as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out


class ManifestError(ValueError):
    """A run folder's manifest.json cannot be read as lookalike wrote it; the message says why."""


def read_manifest(run_dir: Path | str) -> dict[str, Any]:
    """The run folder's manifest.json as written ({} when the folder has none); ManifestError when it is
    not UTF-8 JSON, not an object, or its params are not an object."""
    manifest = Path(run_dir) / "manifest.json"
    if not manifest.is_file():
        return {}
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ManifestError(f"not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        raise ManifestError(f"not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("params", {}), dict):
        raise ManifestError("expected a JSON object whose 'params' is an object")
    return data


def run_config(run_dir: Path | str, manifest: dict[str, Any] | None = None):
    """The typed parameters the run was made with (params.recorded of manifest.json's params), or None
    when the folder has no manifest; ManifestError names a key or type the schema does not know."""
    data = read_manifest(run_dir) if manifest is None else manifest
    if not data:
        return None
    try:
        return P.recorded(data.get("params", {}), "manifest.json")
    except P.ParamsError as exc:
        raise ManifestError(f"its params are not parameters this lookalike knows ({exc})") from None
