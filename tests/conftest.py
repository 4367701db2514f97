from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# every run the tests make (the CI run, the corpus-shape lane) stops on a file a stage's contract does
# not declare (lookalike.stages.contracts), instead of naming it and going on as a user's run does
os.environ.setdefault("LOOKALIKE_STRICT_CONTRACTS", "1")
# pytest workers share the machine's cores: each (and every kernel, Ray actor and tesseract it starts) computes
# on its share of them. Left at their defaults, torch's and the BLAS's thread pools in two workers asked for
# every core each, and waited on one another (two torch-heavy tests side by side: 47 s, against 29 s so)
if os.environ.get("PYTEST_XDIST_WORKER"):
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _share)
SHARED_DATA = REPO.parent / "shared" / "data"


# The CI configuration's run, end to end (runner + report site), is what the slowest tests read. It is the run
# of lookalike installed as a package (pip install --target of a copy of the checkout, no dependencies: they
# are this environment's) from another folder, so it also is the installed package's test
# (tests/e2e/test_installed.py compares its tables with the checkout's stages called directly). It is built
# once a session by a child process that starts with the first test of a session that selected any test
# that reads it (so it overlaps other tests instead of holding a worker idle), in a folder both pytest
# workers share; a test that needs it waits for it. The child dies with the worker that started it.
CI_BUILD = """
import os, shutil, subprocess, sys, traceback
from pathlib import Path
folder, repo = Path(sys.argv[1]), Path(sys.argv[2])
try:
    sys.path.insert(0, str(repo))
    from tests.conftest import copy_of_checkout, installed_env
    src = copy_of_checkout(folder / "src")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target",
                    str(folder / "site"), str(src)], check=True)
    (folder / "ci_run.installed").write_text(str(folder / "site"), encoding="utf-8")
    work = folder / "elsewhere"
    (work / "params" / "regressions").mkdir(parents=True)
    shutil.copy(repo / "params" / "ci.yaml", work / "params" / "ci.yaml")
    shutil.copy(repo / "params" / "regressions" / "demo.csv", work / "params" / "regressions" / "demo.csv")
    subprocess.run([sys.executable, "-m", "lookalike", "run", "params/ci.yaml"], cwd=work,
                   env=installed_env(folder / "site"), check=True)
except BaseException:
    (folder / "ci_run.failed").write_text(traceback.format_exc(), encoding="utf-8")
    raise SystemExit(1)
(folder / "ci_run.path").write_text(str(work / "outputs" / "ci"), encoding="utf-8")
"""


def installed_env(site: Path) -> dict:
    """The environment of a process that runs the installed copy in `site`, not the checkout."""
    env = dict(os.environ, PYTHONPATH=str(site))
    for name in ("LOOKALIKE_PROGRESS", "LOOKALIKE_PROJECT_ROOT"):
        env.pop(name, None)
    return env


class CiRunBuild:
    """The session's CI run, built in the background: start() once for all workers (a file lock decides who
    starts it), wait() for the installed package's folder or for the run folder; a build that failed or
    died fails the test that waits, with the child's output."""

    child: subprocess.Popen | None = None          # in the worker that started it

    def __init__(self, folder: Path):
        self.folder = folder

    def start(self) -> None:
        """Start the build unless a worker of this session already has."""
        import sys

        from filelock import FileLock

        from lookalike.cli.run import _tie_to

        with FileLock(str(self.folder / "ci_run.lock")):
            if (self.folder / "ci_run.pid").is_file():
                return
            log = (self.folder / "ci_run.log").open("wb")
            CiRunBuild.child = subprocess.Popen([sys.executable, "-c", CI_BUILD, str(self.folder), str(REPO)], cwd=REPO,
                                                stdout=log, stderr=subprocess.STDOUT, preexec_fn=_tie_to(os.getpid()))
            (self.folder / "ci_run.pid").write_text(str(CiRunBuild.child.pid), encoding="utf-8")

    def _gone(self) -> bool:
        if CiRunBuild.child is not None:
            return CiRunBuild.child.poll() is not None
        stat = Path(f"/proc/{(self.folder / 'ci_run.pid').read_text(encoding='utf-8')}/stat")
        try:
            return stat.read_text().split(") ")[-1][:1] in ("Z", "X")      # exited, not yet reaped
        except OSError:
            return True

    def wait(self, what: str = "ci_run.path", timeout: float = 1800) -> Path:
        """The folder the build names in `what` (ci_run.path: the run; ci_run.installed: the package), once
        written."""
        import time

        self.start()
        deadline = time.monotonic() + timeout
        done = self.folder / what
        while True:
            if done.is_file():
                return Path(done.read_text(encoding="utf-8"))
            gone = self._gone()
            if done.is_file():
                continue
            if gone or (self.folder / "ci_run.failed").is_file() or time.monotonic() > deadline:
                tail = (self.folder / "ci_run.log").read_text(encoding="utf-8", errors="replace")[-4000:]
                failed = (self.folder / "ci_run.failed")
                why = failed.read_text(encoding="utf-8") if failed.is_file() else "it ended without a word"
                pytest.fail(f"the CI run's build failed ({self.folder}): {why}\n{tail}")
            time.sleep(0.5)

    @staticmethod
    def finish(interrupted: bool) -> None:
        """Session end in the worker that started the build: the other worker may still be waiting for it."""
        if CiRunBuild.child is not None and CiRunBuild.child.poll() is None:
            if interrupted:
                CiRunBuild.child.kill()
            CiRunBuild.child.wait()


def _shared_dir(tmp_path_factory, worker_id) -> Path:
    """The folder every process of this session sees: pytest's base temp folder in one process, its parent
    (which holds each worker's own) under xdist."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


def _ci_build(tmp_path_factory, worker_id) -> CiRunBuild:
    return CiRunBuild(_shared_dir(tmp_path_factory, worker_id))


@pytest.fixture(scope="session", autouse=True)
def _ci_run_started(request, tmp_path_factory, worker_id):
    """With the session's first test: start the CI run's build if any selected test reads it."""
    if any({"ci_run", "installed"} & set(getattr(item, "fixturenames", ())) for item in request.session.items):
        _ci_build(tmp_path_factory, worker_id).start()


@pytest.fixture(scope="session")
def ci_run(tmp_path_factory, worker_id) -> Path:
    """The CI configuration run end to end (runner + report site) by the installed package, from another
    folder; built once a session for every worker (tests copy it before changing anything in it)."""
    return _ci_build(tmp_path_factory, worker_id).wait()


@pytest.fixture(scope="session")
def installed(tmp_path_factory, worker_id) -> Path:
    """The folder lookalike was installed into (`pip install --target`) for the CI run."""
    return _ci_build(tmp_path_factory, worker_id).wait("ci_run.installed")


def _stage_results(run_dir):
    import importlib

    from lookalike import params, stages

    ctx = stages.context(run_dir, params.load_params(REPO / "params" / "ci.yaml"))
    out = {}
    for _notebook, module in stages.STAGES.items():
        res = importlib.import_module(f"lookalike.stages.{module}").run(ctx)
        res.save()
        out[module] = res
    return ctx, out


@pytest.fixture(scope="session")
def results(tmp_path_factory, worker_id):
    """Every stage called directly (no notebooks) on the ci configuration: (ctx, {module: StageResult}).
    Built once a session: the first process to ask builds it under a file lock and pickles it, another
    worker reads the pickle (about 35 s a build on 2 cores)."""
    import dataclasses
    import pickle

    from filelock import FileLock

    from lookalike import params, stages

    shared = _shared_dir(tmp_path_factory, worker_id)
    done = shared / "stage_results.pickle"
    run_dir = shared / "stages" / "ci"
    with FileLock(str(shared / "stage_results.lock")):
        if not done.is_file():
            ctx, out = _stage_results(run_dir)
            # what a stage does after its files are saved has run (and is a closure pickle cannot take)
            done.write_bytes(pickle.dumps({m: dataclasses.replace(r, after_save=[]) for m, r in out.items()}))
            return ctx, out
    return stages.context(run_dir, params.load_params(REPO / "params" / "ci.yaml")), pickle.loads(done.read_bytes())


def pytest_sessionfinish(session, exitstatus):
    CiRunBuild.finish(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


def copy_of_checkout(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked and new, not ignored), symlinks kept: building
    from it leaves no build/ or egg-info in the real checkout."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src, dst = REPO / rel, dest / rel
        if not (src.exists() or src.is_symlink()) or rel.startswith("outputs/"):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    return dest


def write_params(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def make_png(path: Path, color=(200, 30, 30), size=(64, 48)) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


@pytest.fixture(scope="module")
def tiny_pages(tmp_path_factory):
    """(units, folder): three small coloured pages with a white box each, and a caption field."""
    import pandas as pd
    from PIL import Image

    root = tmp_path_factory.mktemp("pages")
    rows = []
    for i, colour in enumerate([(200, 30, 30), (30, 200, 30), (30, 30, 200)]):
        img = Image.new("RGB", (96, 54), colour)
        img.paste((255, 255, 255), (10 + 10 * i, 10, 40 + 10 * i, 30))
        img.save(root / f"p{i}.png")
        rows.append({"unit_id": f"doc:{i + 1}", "image_path": f"p{i}.png", "caption": f"page {i} revenue"})
    return pd.DataFrame(rows), root


def with_corrupt_page(units, folder: Path, data: bytes = b"not a png"):
    """units plus one unit (doc:9) whose image file is not a readable image."""
    import pandas as pd

    (folder / "bad.png").write_bytes(data)
    return pd.concat([units, pd.DataFrame([{"unit_id": "doc:9", "image_path": str(folder / "bad.png")}])],
                     ignore_index=True)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent")
    return SHARED_DATA


def broken_png(path: Path) -> Path:
    """A PNG whose header and checksums are right and whose compressed data stream is not:
    Image.open() and verify() accept it, decoding fails."""
    import io
    import zlib

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 10)).save(buf, format="PNG")
    data = bytearray(buf.getvalue())
    tag = data.index(b"IDAT")
    length = int.from_bytes(data[tag - 4:tag], "big")
    data[tag + 8:tag + 20] = b"\x00" * 12                # zlib stream damaged, chunk length kept ...
    crc = zlib.crc32(bytes(data[tag:tag + 4 + length]))
    data[tag + 4 + length:tag + 8 + length] = crc.to_bytes(4, "big")   # ... and its checksum made right again
    path.write_bytes(bytes(data))
    return path


def truncated_jpeg(path: Path) -> Path:
    """A JPEG cut in half (a download or copy stopped short)."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.effect_noise((200, 150), 60).convert("RGB").save(buf, format="JPEG")
    path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    return path


__all__ = ["REPO", "write_params", "make_png", "shutil", "with_corrupt_page", "broken_png", "truncated_jpeg"]


def pytest_collection_modifyitems(config, items):
    # every test that needs the whole CI run end to end is slow (make test-fast leaves it out)
    for item in items:
        if "ci_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    # the order tests are handed out in (make test gives workers one test at a time): the slow ones first,
    # those that read the CI run after the others (its build runs beside them meanwhile), then the rest, so
    # the last tests of a session are short ones and neither worker idles while the other ends a long one
    def rank(item) -> int:
        if {"ci_run", "installed"} & set(getattr(item, "fixturenames", ())):
            return 1
        return 0 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)


def chromium_binary() -> str | None:
    """Debian's chromium (or chromium-browser) on PATH, if any."""
    return next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)


# the end-to-end page tests drive a real headless browser; without one they skip and say why
needs_chromium = pytest.mark.skipif(chromium_binary() is None or shutil.which("chromedriver") is None,
                                    reason="needs Debian's chromium and chromium-driver (make setup installs them)")


def headless_chrome(*extra_args: str, prefs: dict | None = None):
    """A selenium driver on headless Chromium (the caller quits it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium_binary()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", *extra_args):
        opts.add_argument(arg)
    if prefs:
        opts.add_experimental_option("prefs", prefs)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


# the boxes a page's tables sit in: the run pages' .wide, the stage reports' notebook outputs, code blocks
BOX_SELECTOR = ".wide, pre, .output_html"


def wide_window(width: int = 1300):
    """A headless Chromium window `width` px wide that opens local files (the caller quits it)."""
    return headless_chrome("--allow-file-access-from-files", f"--window-size={width},900")


def sideways(run_dir: Path, width: int = 1300, driver=None) -> list[str]:
    """What scrolls sideways in a window `width` px wide, on summary.html, index.html and every stage
    report of a run: the page itself, or a table's box (its content wider than the box). driver: a
    wide_window(width) to use (and leave open), else one is started and quit here."""
    pages = [run_dir / "summary.html", run_dir / "index.html", *sorted((run_dir / "html").glob("*.report.html"))]
    own = driver is None
    driver = wide_window(width) if own else driver
    out = []
    try:
        for page in [p for p in pages if p.is_file()]:
            driver.get(page.resolve().as_uri())
            full, seen = driver.execute_script("return [document.documentElement.scrollWidth, "
                                               "document.documentElement.clientWidth]")
            if full > seen:
                out.append(f"{page.name}: the page is {full} px wide in a {seen} px window")
            boxes = driver.execute_script(
                f"return Array.from(document.querySelectorAll('{BOX_SELECTOR}')).map(e => "
                "[e.textContent.trim().slice(0, 60), e.scrollWidth, e.clientWidth])")
            out += [f"{page.name}: a box scrolls sideways ({w} px in {c} px): {t!r}" for t, w, c in boxes if w > c + 1]
    finally:
        if own:
            driver.quit()
    return out


@pytest.fixture(scope="session")
def stage_kernel():
    """One stage kernel per test worker for the runs the tests make of generated corpora (the shape lane,
    the plug-in example, your own run ...): run.SharedKernel, which clears every name and sets the working
    folder and the runner's environment before each stage, so only the imported modules carry over (a
    shape's eight stages took 20-22 s in fresh kernels, 8.5 s in a warm one: docs/performance.md)."""
    from lookalike.cli import run

    with run.SharedKernel() as kernel:
        yield kernel


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the whole test session (Ray has no local mode): 2 CPUs and an object
    store sized explicitly (a container's small /dev/shm is a known trap). Yields its address, which
    other processes (a stage kernel, a driver the test kills) connect to."""
    import ray

    from lookalike.retrieval import engine

    engine.connect("", num_cpus=2, object_store_mb=256)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def make_label_run(root: Path, questions: int = 4, per_question: int = 3, seed: int = 0) -> Path:
    """A small finished-run folder the label server can serve: stage 06's pool, the validated
    questions and the units (each with a file name, a caption and a tiny PNG). Question q1 holds a
    script tag and unit u1's caption an HTML tag, so escaping is exercised; file names and captions of
    the first unit of each question hold one of its words (the judge door's signal)."""
    import json

    import pandas as pd

    root.mkdir(parents=True, exist_ok=True)
    units, qs, pool = [], [], []
    for q in range(1, questions + 1):
        word = ["revenue", "margin", "headcount", "dividend", "capex", "churn"][(q - 1) % 6]
        text = f"What was the {word} of firm {q} in 2023?" + (" <script>alert('q')</script>" if q == 1 else "")
        qs.append({"query_id": f"q{q}", "text": text})
        for j in range(per_question):
            u = f"u{(q - 1) * per_question + j + 1}"
            make_png(root / "pages" / f"{u}.png", color=(40 * j % 255, 90, 160))
            caption = (f"{word} table" if j == 0 else f"page {j} of report {q}") + (" <img src=x onerror=alert(1)>" if u == "u1" else "")
            units.append({"unit_id": u, "doc_id": f"d{q}", "image_path": f"pages/{u}.png",
                          "filename": f"{word if j == 0 else 'scan'}_{u}.png", "caption": caption})
            pool.append({"query_id": f"q{q}", "unit_id": u})
    (root / "tables").mkdir(exist_ok=True)
    pd.DataFrame(units).to_csv(root / "tables" / "units.csv", index=False)
    pd.DataFrame(qs).to_csv(root / "tables" / "questions_validated.csv", index=False)
    pd.DataFrame(pool).to_csv(root / "tables" / "pool.csv", index=False)
    (root / "manifest.json").write_text(json.dumps({"params": {"seed": seed}}), encoding="utf-8")
    return root


def run_from_rankings(rankings: dict):
    """A run frame (query_id, unit_id, score) from each question's ranking, best first."""
    import pandas as pd

    return pd.DataFrame([(q, u, float(len(us) - i)) for q, us in rankings.items() for i, u in enumerate(us)],
                        columns=["query_id", "unit_id", "score"])


# the ci configuration's demo corpus, generated once a session for the tests that read it (none changes it)
@pytest.fixture(scope="session")
def ci_corpus(tmp_path_factory):
    from lookalike.data import demo

    out = tmp_path_factory.mktemp("leak")
    return demo.generate("ci", 7, out / "corpus"), out


@pytest.fixture(scope="session")
def ci_units(ci_corpus):
    return ci_corpus[0].units, ci_corpus[1]
