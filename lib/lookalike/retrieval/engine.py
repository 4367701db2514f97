"""Where the page encoding runs: ``encode.engine: local`` (this process, OCR in worker processes)
or ``ray`` (Ray Data on a Ray cluster: a local one with this machine's cores, or the cluster at
``encode.ray_address``).

The Ray engine fills the same content-hash-keyed cache (lookalike.io.cache) the local engine
reads, and then the local engine runs over a warm cache. So the vectors, ids, failed pages and
every table are the local engine's, and a rerun or an interrupted run costs only what is missing:
each page's result is written to the cache the moment its batch finishes.

Per encoder, the work is Ray Data stages over rows that name work items:
  read units (hash each page, ask the cache) -> OCR (CPU actors, one tesseract thread each; only
  for the OCR encoders and only the pages without cached text) -> the encoder (an actor pool; the
  model is loaded once per actor; one GPU per actor when the encoder runs on CUDA) -> write (the
  encoder's own cache writes).
The encoder actor runs the encoder's own ``encode_units`` on one batch of ``encode.batch_size``
consecutive units among those the cache lacks (``Encoder.pending``), the batch the local engine
forms on the same cache, so a model sees the same batches (and gives the same bits) on either
engine. An encoder that cannot say what it lacks gets every unit, and skips what it holds. The per-batch functions are plain Python
(``ocr_one``, ``encode_batch``): the local engine and the actors call the same code.

A cluster other than this machine must see the same paths: the corpus folder, the run folder and
``encode.cache_dir`` on a shared file system.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from pathlib import Path
from collections.abc import Sequence

import pandas as pd

from lookalike.data.schema import resolve_image
from lookalike.io.cache import Cache, image_sha256
from lookalike.retrieval import encoders
from lookalike.retrieval.encoders import ocr

ENGINES = ("local", "ray")
BLOCKS_PER_ACTOR = 32     # Ray Data blocks per actor of a stage (see _run)


class EngineError(encoders.EncodeError):
    """The Ray engine could not start, connect or finish; the message says which and what to do."""


# --- the plain per-batch functions (both engines) --------------------------------------------------

def ocr_one(path: str, sha: str, engine: str, eid: str, cache: Cache) -> tuple[str, str]:
    """OCR one page into the cache. Returns (status, reason): ("ok", "") or ("failed", why) — a page
    that cannot be read is reported, not fatal (the local pass reports it again, per encoder)."""
    try:
        cache.put_text(sha, eid, ocr.ocr_image(path, engine))
        return "ok", ""
    except encoders.EncodeError as exc:
        return "failed", str(exc)


def encode_batch(enc: encoders.Encoder, units: pd.DataFrame, base_dir: Path, cache: Cache) -> dict:
    """One batch of units through an encoder's own encode_units, which writes each result to the
    cache. Returns counts for the engine's summary (computed: the cache entries it wrote)."""
    before = cache.writes
    vecs = enc.encode_units(units, base_dir, cache)
    return {"units": len(units), "computed": cache.writes - before, "failed": len(vecs.stats.get("failed", []))}


def batches(n: int, size: int) -> list[tuple[int, int]]:
    """The (start, stop) row ranges the encoder actors get: consecutive, size rows each."""
    size = max(1, int(size))
    return [(s, min(s + size, n)) for s in range(0, n, size)]


def distributable(spec: str) -> bool:
    """Whether an encode.encoders entry runs on Ray: encoders whose encode_units caches every page's
    result (the built-in page encoders; a plug-in that sets ``distributable = True``, as one built on
    encoders.base.cached_pages can). The endpoint encoder runs in the driver: its work is a server's."""
    cls = encoders.encoder_class(spec)
    return bool(getattr(cls, "distributable", False))


def needs_ocr(spec: str) -> bool:
    """Whether the encode.encoders entry reads OCR text (and so needs the page text first)."""
    return bool(getattr(encoders.encoder_class(spec), "reads_ocr", False))


# --- Ray ------------------------------------------------------------------------------------------

def _quiet_ray() -> None:
    """No progress bars or execution summaries from Ray Data (stored notebooks hold none)."""
    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False
    for attr in ("enable_operator_progress_bars", "print_on_execution_start", "enable_rich_progress_bars"):
        if hasattr(ctx, attr):
            setattr(ctx, attr, False)
    for name in ("ray", "ray.data", "ray.data._internal.execution.streaming_executor"):
        logging.getLogger(name).setLevel(logging.ERROR)


def connect(address: str = "", num_cpus: int = 0, object_store_mb: int = 512) -> dict:
    """Ray, ready: the running session when this process already has one (the tests share one),
    else the cluster at address, else a new local cluster with num_cpus (0: this machine's cores)
    and an object store of object_store_mb (set explicitly: containers often have a small
    /dev/shm, and Ray's default would take 30% of memory there). Returns the cluster's resources."""
    # set before ray is imported: in a notebook kernel ray logs at import that ipywidgets is missing
    logging.getLogger("ray.widgets").setLevel(logging.ERROR)
    logging.getLogger("ray.widgets.util").setLevel(logging.ERROR)
    try:
        import ray
    except ImportError as exc:
        raise EngineError("encode.engine: ray needs the ray package (pip install 'ray[data]'; make setup "
                          "installs it)") from exc
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if not ray.is_initialized():
        kw = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        try:
            if address:
                ray.init(address=address, **kw)
            else:
                ray.init(num_cpus=num_cpus or os.cpu_count() or 1,
                         object_store_memory=int(object_store_mb) * 1024 * 1024, **kw)
        except Exception as exc:      # ray raises ConnectionError, RuntimeError, ValueError …
            where = f"the Ray cluster at {address!r}" if address else "a local Ray cluster"
            raise EngineError(f"encode.engine: ray could not start or reach {where}: {type(exc).__name__}: {exc} "
                              f"(check encode.ray_address, or leave it empty for a local cluster)") from exc
    _quiet_ray()
    return dict(ray.cluster_resources())


class _OcrActor:
    """A CPU actor: OCR of one page per row (its path and image sha256), into the cache."""

    def __init__(self, engine: str, eid: str, cache_root: str):
        os.environ["OMP_THREAD_LIMIT"] = "1"       # one tesseract thread per actor, as the local workers
        self.engine, self.eid = engine, eid
        self.cache = Cache(cache_root)

    def __call__(self, row: dict) -> dict:
        status, reason = ocr_one(row["path"], row["sha"], self.engine, self.eid, self.cache)
        return {"path": row["path"], "status": status, "reason": reason}


class _EncoderActor:
    """An encoder actor: the encoder built once (its model loaded once), then one batch per row (the
    batch's rows of the units table travel pickled in the row itself, so no actor holds the corpus)."""

    def __init__(self, spec: str, settings: dict, make, base_dir: str, cache_root: str, threads: int):
        import torch

        torch.set_num_threads(threads)              # the driver's count: a CPU kernel's bits can depend on it
        self.enc = make(spec, **settings)
        self.enc.progress = False                   # no bars from an actor
        self.base_dir = Path(base_dir)
        self.cache = Cache(cache_root)

    def __call__(self, row: dict) -> dict:
        units = pickle.loads(row["units"])
        try:
            out = encode_batch(self.enc, units, self.base_dir, self.cache)
        except encoders.EncodeError as exc:       # the driver's local pass meets it again and says it as the local engine
            return {"batch": int(row["batch"]), "units": len(units), "computed": 0, "failed": len(units),
                    "error": str(exc)}
        return {"batch": int(row["batch"]), "units": out["units"], "computed": out["computed"],
                "failed": out["failed"], "error": ""}


def _run(dataset_rows: list[dict], actor, kwargs: dict, concurrency: int, num_gpus: float = 0,
         num_cpus: float = 1) -> list[dict]:
    """One Ray Data stage: the rows (work items) through an actor pool of concurrency actors; the
    actors' output rows, in any order."""
    import warnings

    import ray.data

    if not dataset_rows:
        return []
    # Small blocks (up to BLOCKS_PER_ACTOR per actor, one row each on small inputs): an actor that
    # finishes early takes the next block, so the last one to finish waits on one small block, not a
    # quarter of its share.
    blocks = max(1, min(len(dataset_rows), BLOCKS_PER_ACTOR * max(1, concurrency)))
    ds = ray.data.from_items(dataset_rows, override_num_blocks=blocks)
    # max_restarts=0: Ray cannot restart an actor whose constructor arguments sit in the object store
    # (ray-project/ray#53727; Ray Data puts them there and logs an error on every run, #57733). An
    # actor that dies fails the stage instead; the rerun then computes only what the cache lacks.
    # Ray 2.60 takes it only as a (deprecated) extra remote argument.
    options = dict(fn_constructor_kwargs=kwargs, concurrency=max(1, min(concurrency, len(dataset_rows))),
                   num_cpus=num_cpus, max_restarts=0)
    if num_gpus:
        options.update(num_gpus=num_gpus)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*is deprecated")
        return ds.map(actor, **options).take_all()


def _cpu_workers(resources: dict, workers: int) -> int:
    return max(1, min(int(workers) if workers else int(resources.get("CPU", 1)), int(resources.get("CPU", 1)) or 1))


def prefill(units: pd.DataFrame, base_dir: Path, specs: Sequence[str], cache: Cache, settings: dict,
            make_encoder, address: str = "", workers: int = 0, object_store_mb: int = 512) -> pd.DataFrame:
    """Run every distributable encoder of specs over units on Ray, into cache. make_encoder(spec,
    **settings) builds an encoder as the local engine does (systems.make_encoder; actors receive it by
    reference, and the model is built in each actor). Returns one row per
    Ray stage: stage, encoder, items (pages or batches), computed, failed, workers, gpus, seconds.
    Encoders that do not run on Ray are left to the local pass (a row says so)."""
    import torch

    resources = connect(address, workers, object_store_mb)
    cpu_workers = _cpu_workers(resources, workers)
    gpus = int(resources.get("GPU", 0))
    base_dir = Path(base_dir).resolve()        # actors run in other folders (and on other machines)
    cache_root = str(Path(cache.root).resolve())
    paths = [str(resolve_image(p, base_dir).resolve()) for p in units["image_path"]]
    rows: list[dict] = []
    ocr_done: set[str] = set()
    for spec in specs:
        name = encoders.system_name(spec)
        if not distributable(spec):
            rows.append(dict(stage="encode", encoder=name, items=0, computed=0, failed=0, workers=0, gpus=0,
                             seconds=0.0, note="runs in the driver (not distributable)"))
            continue
        enc = make_encoder(spec, **settings)
        if needs_ocr(spec):
            engine = enc.settings["ocr_engine"]
            if engine == "tesseract" and not ocr.tesseract_available():
                raise encoders.EncodeError("OCR engine 'tesseract' needs Debian's tesseract-ocr on every Ray node, "
                                    "or set encode.ocr_engine: rapidocr")
            eid = ocr.engine_id(engine)
            if eid not in ocr_done:
                t0 = time.perf_counter()
                # pages read from their PDF text layer need no OCR; with text_source 'text-layer' none does
                policy = getattr(enc, "text_source", "auto")
                layers = ocr.text_layers(paths, policy)
                shas = [image_sha256(p) if layer is None else "" for p, layer in zip(paths, layers)]
                probe = Cache(cache.root)          # the stage's own cache keeps its hit counts
                todo = [i for i, s in enumerate(shas) if s and policy != "text-layer" and probe.get_text(s, eid) is None]
                got = []
                if todo:
                    got = _run([{"path": paths[i], "sha": shas[i]} for i in todo], _OcrActor,
                               dict(engine=engine, eid=eid, cache_root=cache_root), cpu_workers)
                rows.append(dict(stage="ocr", encoder=eid, items=len(todo),
                                 computed=sum(r["status"] == "ok" for r in got),
                                 failed=sum(r["status"] != "ok" for r in got), workers=min(cpu_workers, len(todo)),
                                 gpus=0, seconds=round(time.perf_counter() - t0, 2), note=""))
                ocr_done.add(eid)
            if enc.kind == "text":           # BM25 reads the OCR text itself: nothing more to compute
                continue
        t0 = time.perf_counter()
        # only the units the cache lacks, when the encoder can tell: the batches encode_units forms
        # on this cache, and a warm rerun starts no Ray stage at all
        pending = enc.pending(units, base_dir, Cache(cache.root))
        todo_units = units if pending is None else units.iloc[pending]
        if pending is not None and not pending:
            rows.append(dict(stage="encode", encoder=name, items=0, computed=0, failed=0, workers=0, gpus=0,
                             seconds=round(time.perf_counter() - t0, 2), note=""))
            continue
        ranges = batches(len(todo_units), enc.batch_size)
        on_gpu = str(enc.device).startswith("cuda") and gpus > 0
        # On CPU an encoder actor runs with the driver's torch thread count (so its kernels, and bits,
        # are the local engine's) and holds that many of the cluster's CPUs: on one machine that is
        # one actor using every core, as the local engine; on a cluster, one per that many CPUs.
        threads = max(1, min(torch.get_num_threads(), int(resources.get("CPU", 1)) or 1))
        actors = gpus if on_gpu else max(1, int(resources.get("CPU", 1)) // threads)
        rows_in = [{"batch": b, "units": pickle.dumps(todo_units.iloc[start:stop])}
                   for b, (start, stop) in enumerate(ranges)]
        got = _run(rows_in, _EncoderActor, dict(spec=spec, settings=settings, make=make_encoder, base_dir=str(base_dir),
                                                cache_root=cache_root, threads=threads), actors,
                   num_gpus=1 if on_gpu else 0, num_cpus=1 if on_gpu else threads)
        rows.append(dict(stage="encode", encoder=name, items=len(ranges), computed=sum(r["computed"] for r in got),
                         failed=sum(r["failed"] for r in got), workers=min(actors, len(ranges)),
                         gpus=min(actors, len(ranges)) if on_gpu else 0,
                         seconds=round(time.perf_counter() - t0, 2), note=""))
    return pd.DataFrame(rows)
