"""The runner: python -m lookalike run params/<run>.yaml.

Merges and checks the parameters (lookalike.params), executes each stage notebook in order with
papermill into outputs/<run>/notebooks/, then builds the report site. Adding a stage is adding a
notebook to notebooks/ and its function module to lookalike.stages.STAGES.
"""

from __future__ import annotations

import os
import queue
import sys
import time
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

import pandas as pd

from lookalike import params
from lookalike.stages import contracts
from lookalike import progress
from lookalike import stages as stage_modules
from lookalike.data import schema as corpus
from lookalike.report import run_folder
from lookalike.report import site as report

NOTEBOOK_DIR = params.PACKAGE_DIR / "notebooks"          # package data: an installed lookalike carries its stages
STAGES = list(stage_modules.STAGES)
# Every notebook declares run_dir and params. The runner executes a stage with its working
# directory in outputs/<run>/notebooks/, so ".." is the run folder (nbval re-executes the stored
# notebook from a copy of that folder, so the path stays right there too), and injects the whole
# merged parameter set as params: defaults live in params/base.yaml only. Path parameters stay as
# written (relative to the repository root) and the stages resolve them one way
# (StageContext.path), so a stored notebook carries no machine-specific absolute path.
RUN_DIR_PARAM = "run_dir"
SUMMARY_STAGE = "07_metric_tables"   # the stage that writes summary.html
PARAMS_PARAM = "params"


# The stage kernels log at ERROR: ipykernel warns on every start that its local TCP sockets are not
# encrypted (the kernel listens on 127.0.0.1 only, for this process), a line on the terminal per
# stage that says nothing about the run. Errors in the kernel still print; cell output is untouched.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR"]

class OutputError(OSError):
    """The run folder cannot be made or written."""


class StageFailed(RuntimeError):
    """A stage notebook raised; the partial executed notebook is kept at .notebook."""

    def __init__(self, stage: str, notebook: Path, reason: str):
        super().__init__(f"stage {stage} failed: {reason}\n  partial notebook kept at {notebook}")
        self.stage, self.notebook, self.reason = stage, notebook, reason


def stage_parameters(stage: str, merged: dict[str, Any]) -> dict[str, Any]:
    """The values to inject into a stage: its run folder and the whole merged parameter set."""
    import papermill as pm

    declared = set(pm.inspect_notebook(str(NOTEBOOK_DIR / f"{stage}.ipynb")))
    if declared != {RUN_DIR_PARAM, PARAMS_PARAM}:
        raise params.ParamsError(f"notebooks/{stage}.ipynb must declare exactly run_dir and params in its parameters "
                            f"cell (defaults live in params/base.yaml), got {sorted(declared)}")
    return {RUN_DIR_PARAM: "..", PARAMS_PARAM: merged}


def _normalise(nb_path: Path) -> None:
    """Drop per-execution timestamps, give the injected cell a fixed id and join each cell's consecutive
    stream outputs, so re-runs diff cleanly.

    Timestamps belong in manifest.json only. The kernel sends what a cell prints in pieces, cut wherever
    its flush timer happens to fire (a line's text and its newline became two outputs in one run and one
    in the next, and the notebook and its pages were no longer the same bytes): the pieces are joined.
    """
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell["id"] = "injected-parameters"
        if cell.get("outputs"):
            cell["outputs"] = _joined_streams(cell["outputs"])
    nbformat.write(nb, nb_path)


def _joined_streams(outputs: list) -> list:
    """A cell's outputs with each run of stream outputs to one stream (stdout, stderr) joined into one."""
    joined: list = []
    for out in outputs:
        last = joined[-1] if joined else None
        if (out.get("output_type") == "stream" and last is not None and last.get("output_type") == "stream"
                and last.get("name") == out.get("name")):
            last["text"] = "".join(last["text"]) + "".join(out["text"])
        else:
            joined.append(out)
    return joined


def execute(params_file: Path | str, out_root: Path | str = params.PROJECT_ROOT / "outputs", stages: list[str] | None = None,
            log=print, shared_kernel: bool | SharedKernel = False) -> Path:
    """Run the stages for one parameter file; returns the run folder. Raises StageFailed or ParamsError.

    shared_kernel: True runs every stage notebook in one kernel, started once and shut down at the end,
    instead of a fresh kernel per stage (about 4 s of start-up and imports each); a SharedKernel the
    caller holds runs the stages of several runs in turn and stays up. Either way each stage starts
    with no name an earlier notebook defined (see SharedKernel): only imported modules carry over. The
    test lane uses it for generated corpora; ``lookalike run``, the stored CI notebooks and the shapes
    whose point is the notebook path keep one kernel per stage."""
    merged = params.load_params(params_file)
    # Kernels inherit this environment: no progress bars with rates and timings in the stored
    # notebooks, and no warning that prints the install path (tqdm's "IProgress not found" names the
    # virtual environment's folder), so a re-run from another checkout changes no byte of them that
    # the data did not change.
    for key, value in (("TQDM_DISABLE", "1"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1"), ("TRANSFORMERS_VERBOSITY", "error"),
                       ("PYTHONWARNINGS", "ignore:IProgress not found")):
        os.environ.setdefault(key, value)
    stages = stages or STAGES
    unknown = [s for s in stages if s not in STAGES]
    if unknown:          # before the folder is made: a misspelt stage writes nothing
        raise params.ParamsError(f"unknown stage(s) {unknown}; stages are {STAGES}")
    run_dir = Path(out_root) / merged["run"]
    nb_dir = run_dir / "notebooks"
    if run_dir.is_file() or (run_dir.is_dir() and any(run_dir.iterdir()) and not nb_dir.is_dir()
                             and not (run_dir / "manifest.json").is_file()):
        # a run rewrites index.html, summary.html, tables/ ... in its folder: never in a folder of someone else's
        raise OutputError(f"{run_dir} already holds files that are not a lookalike run (no notebooks/ or "
                          "manifest.json there); nothing was written — choose another --out or run name")
    try:
        nb_dir.mkdir(parents=True, exist_ok=True)
        probe = nb_dir / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"cannot write the run folder {run_dir} ({exc.strerror or exc}); give --out a folder "
                          "you can write") from None
    plan = {stage: stage_parameters(stage, merged) for stage in stages}   # fail on params before running anything
    try:
        with run_folder.one_writer(run_dir) as stale:
            if stale:
                log(f"[lookalike] {merged['run']}: the last run of this folder ({stale}) was killed before it ended "
                    "(its files may be half old, half new); this run writes them again")
            return _execute_locked(merged, run_dir, nb_dir, stages, plan, log, shared_kernel)
    except run_folder.RunFolderBusy as exc:
        raise OutputError(str(exc)) from None


def _execute_locked(merged: dict, run_dir: Path, nb_dir: Path, stages: list[str], plan: dict, log,
                    shared_kernel: bool | SharedKernel) -> Path:
    """execute's run, with the run folder's lock held."""
    run_folder.run_dirs(run_dir)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    timings: dict[str, float] = {}
    failed: StageFailed | None = None
    with progress.relay():
        # every long pass a stage makes draws its bar here, on this terminal (never in the notebook)
        try:
            _run_stages(stages, plan, merged, nb_dir, run_dir, log, timings, shared_kernel)
        except StageFailed as exc:
            failed = exc
    units_csv = run_dir / "tables" / "units.csv"
    fp = ""
    if units_csv.is_file():
        fp = corpus.fingerprint(pd.read_csv(units_csv, dtype=str, keep_default_na=False), run_dir)
    if failed is None:
        ran = [s for s in STAGES if (nb_dir / f"{s}.ipynb").is_file()]
        report.build_index(run_dir, params.typed(merged), ran, not_run=[s for s in STAGES if s not in ran])
    else:
        # the run still leaves a report: what ran, the stage that failed and why, what did not run
        later = stages[stages.index(failed.stage) + 1:]
        ran = [s for s in STAGES if s in timings or (s not in stages and (nb_dir / f"{s}.ipynb").is_file())]
        report.build_index(run_dir, params.typed(merged), ran, failed={"stage": failed.stage, "error": failed.reason,
                                                        "notebook": f"notebooks/{failed.notebook.name}"}, not_run=later)
        if SUMMARY_STAGE not in timings:
            report.write_failed_summary(run_dir, str(merged.get("title", "lookalike report")), failed.stage,
                                        failed.reason, later)
    run_folder.write_manifest(run_dir, merged, params.params_hash(merged), timings, fp, params.CHECKOUT, started,
                          datetime.now(UTC).isoformat(timespec="seconds"))
    if failed is not None:
        raise failed
    log(f"[lookalike] {merged['run']}: report at {run_dir / 'index.html'}")
    return run_dir


def _tie_to(parent: int):
    """A Popen preexec_fn (Linux): the child is killed the moment the process that started it dies,
    however it dies. A kernel started by a runner that then gets SIGKILL (no handler runs, and
    ipykernel's own parent poller only starts once the kernel is up) would otherwise live on as an
    orphan of several hundred MB."""
    def tie() -> None:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)          # PR_SET_PDEATHSIG
        if os.getppid() != parent:             # the runner died before the line above: go now
            os._exit(1)
    return tie


def kernel_manager_class(blocking: bool = False):
    """jupyter_client's kernel manager whose kernels die with the runner (see _tie_to; on Linux, where
    prctl exists) and are not interrupted on their way down. blocking: the synchronous manager (a
    kernel the runner itself shuts down, outside any event loop: shared_kernel)."""
    from jupyter_client.manager import AsyncKernelManager, KernelManager

    base = KernelManager if blocking else AsyncKernelManager
    tie = sys.platform.startswith("linux")

    class RunnerKernelManager(base):  # type: ignore[valid-type,misc]  # the base is picked at run time
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            if tie:
                kw.setdefault("preexec_fn", _tie_to(os.getpid()))
            return await super()._async_launch_kernel(kernel_cmd, **kw)

        async def _async_interrupt_kernel(self):
            # jupyter_client interrupts (SIGINT) every kernel it shuts down, in case a cell still runs.
            # A stage's kernel is shut down after its last cell, and a SIGINT that lands while the kernel
            # answers a message (nbclient's last requests) printed "[IPKernelApp] ERROR | KeyboardInterrupt
            # caught in kernel." on the terminal of a run that went well, now and then. A kernel still
            # busy at shutdown is killed once the shutdown request's wait is over, as before.
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return RunnerKernelManager


class SharedKernel:
    """One kernel for the stage notebooks of one run or of several in turn (execute's shared_kernel).
    nbclient starts it for the first stage; before every later stage it is made to look fresh: the
    names earlier notebooks defined and their outputs are removed, its working folder is that stage's
    notebooks folder, and its environment is the runner's now, as a kernel started now would inherit
    it (the progress channel is a fresh file per run; a test may set a variable). What carries
    over is what a fresh kernel spends its first seconds on: the modules already imported (and what
    they cache, such as a loaded model), and IPython's input history. close() shuts it down."""

    def __init__(self) -> None:
        self.km = kernel_manager_class(blocking=True)(kernel_name="python3")
        self.inherited: set[str] = set()       # the runner's variables the kernel was started with

    def prepare(self, cwd: Path) -> None:
        """Make the kernel, if one is running, ready for a stage whose notebook runs in cwd; a kernel
        that died is shut down so that the stage starts a new one."""
        if self.km.has_kernel and not self.km.is_alive():
            # shutting a kernel down closes its manager's ZMQ context: the next stage's kernel needs a new one
            self.km.shutdown_kernel(now=True)
            self.km = kernel_manager_class(blocking=True)(kernel_name="python3")
        if not self.km.has_kernel:
            self.inherited = set(os.environ)    # nbclient starts it next, with this environment
            return
        # variables the kernel set itself (ipykernel's own) are left alone; the runner's are made current
        env = {key: os.environ.get(key) for key in sorted(self.inherited | set(os.environ))}
        self.inherited |= set(os.environ)
        # IPython's %reset would do the clearing too, but it ends in a full garbage collection: 0.65 s a
        # stage after a run, against 6 ms for removing the names and the output history directly
        code = ("def _lookalike_fresh(shell, cwd, env):\n"
                "    import os\n"
                "    keep = set(shell.user_ns_hidden) | {'__builtin__', '__builtins__', '__name__'}\n"
                "    for name in [n for n in shell.user_ns if n not in keep]:\n"
                "        del shell.user_ns[name]\n"
                "    shell.history_manager.output_hist.clear()\n"
                "    shell.user_ns.update({'_': '', '__': '', '___': ''})\n"
                "    os.chdir(cwd)\n"
                "    for key, value in env.items():\n"
                "        os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)\n"
                f"_lookalike_fresh(get_ipython(), {str(cwd)!r}, {env!r})\n")   # it removes its own name too
        # the shell channel only: its requests queue until it connects, and the reply is all this needs
        # (a client's wait_for_ready spends about 0.2 s on IOPub each time)
        kc = self.km.client()
        kc.start_channels(iopub=False, stdin=False, hb=False, control=False)
        try:
            sent = kc.execute(code, store_history=False)
            deadline = time.monotonic() + 120
            reply: dict = {}
            while reply.get("parent_header", {}).get("msg_id") != sent:
                reply = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise RuntimeError(f"the shared stage kernel did not answer in 120 s while being reset for {cwd}") from None
        finally:
            kc.stop_channels()
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the shared stage kernel could not be reset for {cwd}: "
                               f"{reply['content'].get('ename')}: {reply['content'].get('evalue')}")

    def close(self) -> None:
        """Shut the kernel down (nothing to do when none is running)."""
        if self.km.has_kernel:
            self.km.shutdown_kernel(now=True)

    def __enter__(self) -> SharedKernel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _run_stages(stages: list[str], plan: dict, merged: dict, nb_dir: Path, run_dir: Path, log,
                timings: dict[str, float] | None = None, shared_kernel: bool | SharedKernel = False) -> dict[str, float]:
    """Execute each stage notebook with papermill, normalise it and export its HTML; fills timings
    (stage -> seconds) as stages finish, so a failure still leaves the times of those that ran.
    shared_kernel: one kernel for every stage (see execute); one made here is shut down when the
    stages end, one handed in stays up."""
    if params.CHECKOUT is None:
        # an installed lookalike: the kernels (started in the run's notebooks folder) resolve
        # relative paths from the folder the runner started in
        os.environ[params.PROJECT_ENV] = str(params.PROJECT_ROOT)
    manager = kernel_manager_class()
    timings = {} if timings is None else timings
    # a kernel manager handed to papermill is used and left running (nbclient shuts down only the
    # kernels it started itself): the first stage starts the kernel, SharedKernel.close shuts it down
    kernel = shared_kernel if isinstance(shared_kernel, SharedKernel) else SharedKernel() if shared_kernel else None
    try:
        _each_stage(stages, plan, merged, nb_dir, run_dir, log, timings, manager, kernel)
    finally:
        if kernel is not None and kernel is not shared_kernel:
            kernel.close()
    return timings


def _each_stage(stages, plan, merged, nb_dir: Path, run_dir: Path, log, timings: dict, manager,
                kernel: SharedKernel | None) -> None:
    import papermill as pm

    for stage in stages:
        out_nb = nb_dir / f"{stage}.ipynb"
        before = _files(run_dir)
        log(f"[lookalike] {merged['run']}: stage {stage} ...")
        t0 = time.perf_counter()
        if kernel is not None:
            kernel.prepare(nb_dir)
        try:
            # the notebook is written once, when it ends (or fails): saving it after every cell, as
            # papermill does by default, rewrote the growing notebook dozens of times per stage
            pm.execute_notebook(str(NOTEBOOK_DIR / f"{stage}.ipynb"), str(out_nb), parameters=plan[stage],
                                cwd=str(nb_dir), kernel_name="python3", progress_bar=False, log_output=False,
                                request_save_on_cell_execute=False, autosave_cell_every=0,
                                kernel_manager_class=manager, extra_arguments=KERNEL_ARGUMENTS,
                                **({"km": kernel.km} if kernel is not None else {}))
        except pm.PapermillExecutionError as exc:
            raise StageFailed(stage, out_nb, f"{exc.ename}: {exc.evalue}") from None
        timings[stage] = time.perf_counter() - t0
        _normalise(out_nb)
        log(f"[lookalike] {merged['run']}: stage {stage} done in {timings[stage]:.1f} s")
        report.notebook_to_html(out_nb, run_dir / "html" / f"{stage}.html", with_code=True)
        report.notebook_to_html(out_nb, run_dir / "html" / f"{stage}.report.html", with_code=False)
        _check_contract(stage, before, _files(run_dir), out_nb, log)


STRICT_CONTRACTS = "LOOKALIKE_STRICT_CONTRACTS"


def _files(run_dir: Path) -> set[str]:
    return {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}


def _check_contract(stage: str, before: set[str], after: set[str], out_nb: Path, log) -> None:
    """The files a stage created must be ones its contract (or the runner) declares. An undeclared one
    is lookalike's bug: with LOOKALIKE_STRICT_CONTRACTS set (the tests) it stops the run, otherwise
    the runner names it and goes on."""
    undeclared = contracts.undeclared_files(stage, after - before)
    if not undeclared:
        return
    words = (f"{stage} wrote files its contract does not declare: {', '.join(undeclared[:10])}"
             f"{' ...' if len(undeclared) > 10 else ''} (lookalike.stages.contracts)")
    if os.environ.get(STRICT_CONTRACTS):
        raise StageFailed(stage, out_nb, f"ContractError: {words}")
    log(f"[lookalike] warning: {words}")


def main(params_file: str, out_root: str | None = None, stages: list[str] | None = None) -> int:
    """``lookalike run PARAMS``: every stage (or those named) into the run folder; 1 when a stage failed, 2 on bad
    params or outputs."""
    try:
        execute(params_file, out_root or params.PROJECT_ROOT / "outputs", stages)
    except (params.ParamsError, StageFailed, OutputError) as exc:
        print(f"lookalike run: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, StageFailed) else 2
    except OSError as exc:
        # a full disk or a file-size limit while the runner writes the pages or the manifest: one line, and
        # no table is left half-written (each is written whole or not at all)
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"lookalike run: writing the run folder failed{where}: {exc.strerror or exc}; free space (or raise "
              "the limit) and run again — tables already written are whole", file=sys.stderr)
        return 2
    return 0
