"""The runner end to end: report site, offline HTML, escaping, failing stages, stored notebooks."""

import json
import re
import signal
import time

import nbformat
import pandas as pd
import pytest
from lookalike import params as P
from lookalike.cli import run

from tests.conftest import REPO, make_png, write_params


def test_ci_run_writes_the_site(ci_run):
    for rel in ("index.html", "manifest.json", "tables/units.csv", "tables/questions.csv",
                "notebooks/01_stratify_corpus.ipynb", "html/01_stratify_corpus.html",
                "html/01_stratify_corpus.report.html", "figures/01_strata.svg", "figures/01_strata.vl.json",
                "figures/01_strata.html", "figures/01_montage.png"):
        assert (ci_run / rel).is_file(), rel
    manifest = json.loads((ci_run / "manifest.json").read_text())
    assert manifest["params"]["run"] == "ci"
    assert manifest["params_hash"] == P.params_hash(P.load_params(REPO / "params" / "ci.yaml"))
    assert set(manifest["stage_wall_seconds"]) == set(run.STAGES)
    assert len(manifest["corpus_fingerprint"]) == 64
    assert manifest["versions"]["pandas"] == pd.__version__
    units = pd.read_csv(ci_run / "tables" / "units.csv")
    assert list(units.columns[:9]) == ["unit_id", "doc_id", "page", "image_path", "template_id", "entity",
                                       "metric", "period", "revision"]
    index = (ci_run / "index.html").read_text()
    assert f"{len(units)} units" in index and "01_strata.svg" in index


def test_ci_run_validates_labels_and_tabulates(ci_run):
    t = lambda name: pd.read_csv(ci_run / "tables" / f"{name}.csv", keep_default_na=False)  # noqa: E731
    validation = t("question_validation")
    assert list(validation.columns[:5]) == ["query_id", "status", "axis", "repaired", "final_text"]
    assert (validation["status"] == "answerable_from_distractor").any()
    assert set(t("questions_validated")["query_id"]) == set(validation.loc[validation["slice"] != "dropped", "query_id"])
    assert list(t("sufficiency").columns[:6]) == ["system", "negatives", "k", "n", "sufficient", "sufficient_lo"]
    assert list(t("evidence_complete").columns) == ["system", "aggregate", "evidence_structure", "measure", "k",
                                                     "value", "n", "value_lo", "value_hi"]
    systems = set(t("sufficiency")["system"])
    assert {"ocr-minilm", "ocr-bm25", "caption-minilm", "hybrid-rrf"} <= systems
    current = t("labels_current")
    assert len(current) == len(t("pool")) and current["adjudicated"].all()
    assert (ci_run / "labelling" / "label.html").is_file() and (ci_run / "labels" / "store.jsonl").is_file()
    summary = (ci_run / "summary.html").read_text()
    assert "do not share a denominator" in summary and "<svg" in summary and 'class="input_area"' not in summary
    assert 'href="summary.html"' in (ci_run / "index.html").read_text()


@pytest.mark.slow
def test_stages_in_one_shared_kernel_write_the_notebooks_and_tables_a_kernel_per_stage_writes(tmp_path, monkeypatch):
    """shared_kernel (the shape lane's generated corpora): one kernel started for the whole run and shut
    down at its end; every stage notebook, table and headline byte-identical to a kernel per stage."""
    corpus = tmp_path / "corpus"
    rows = []
    for i in range(6):
        make_png(corpus / f"p{i}.png", color=(40 * i, 90, 200 - 30 * i))
        rows.append({"unit_id": f"deck{i // 3}:{i % 3 + 1}", "image_path": f"p{i}.png", "template_id": f"t{i % 2}",
                     "content_type": "chart"})
    pd.DataFrame(rows).to_csv(corpus / "manifest.csv", index=False)
    params = write_params(tmp_path / "mine.yaml", f"run: mine\ncorpus:\n  source: manifest\n"
                                                  f"  manifest: {corpus / 'manifest.csv'}\n"
                                                  "encode:\n  encoders: [ocr-bm25, appearance]\n")
    started = []
    real = run.kernel_manager_class

    def counting(blocking=False):
        base = real(blocking)

        class Counted(base):
            async def _async_pre_start_kernel(self, **kw):
                started.append(blocking)
                return await super()._async_pre_start_kernel(**kw)
        return Counted

    monkeypatch.setattr(run, "kernel_manager_class", counting)
    stages = list(run.STAGES)[:2]
    one = run.execute(params, out_root=tmp_path / "shared", stages=stages, log=lambda *_: None, shared_kernel=True)
    assert started == [True]
    # a kernel the caller holds runs a second run too (another folder, another progress channel)
    with run.SharedKernel() as kernel:
        run.execute(params, out_root=tmp_path / "held", stages=stages, log=lambda *_: None, shared_kernel=kernel)
        again = run.execute(params, out_root=tmp_path / "again", stages=stages, log=lambda *_: None,
                            shared_kernel=kernel)
        assert kernel.km.is_alive()
    assert started == [True, True]
    each = run.execute(params, out_root=tmp_path / "each", stages=stages, log=lambda *_: None)
    assert started == [True, True, False, False]

    def cells(path):       # a shared kernel numbers its executions on from the last notebook's: all else is the same
        nb = nbformat.read(path, as_version=4)
        return [(c.cell_type, c.source, [{k: v for k, v in o.items() if k != "execution_count"} for o in c.get("outputs", [])])
                for c in nb.cells]
    for shared in (one, again):
        for sub in ("tables", "headlines"):
            a, b = sorted((shared / sub).iterdir()), sorted((each / sub).iterdir())
            assert [p.name for p in a] == [p.name for p in b] and a
            for x, y in zip(a, b):
                assert x.read_bytes() == y.read_bytes(), x.name
        for stage in stages:
            assert cells(shared / "notebooks" / f"{stage}.ipynb") == cells(each / "notebooks" / f"{stage}.ipynb"), stage


def _in_kernel(km, code: str = "", expression: str = "None") -> str:
    """Run code in km's kernel, then give expression's value there as its repr."""
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        reply = kc.execute_interactive(code, user_expressions={"v": expression}, timeout=60, output_hook=lambda m: None)
    finally:
        kc.stop_channels()
    assert reply["content"]["status"] == "ok", reply["content"]
    return reply["content"]["user_expressions"]["v"]["data"]["text/plain"]


@pytest.mark.slow
def test_a_shared_kernel_starts_each_stage_with_no_earlier_name_in_the_stages_folder_and_environment(tmp_path,
                                                                                                    monkeypatch):
    from lookalike import progress

    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir()
    later.mkdir()
    monkeypatch.setenv("LOOKALIKE_TEST_GONE_LATER", "1")
    monkeypatch.setenv(P.PROJECT_ENV, "elsewhere")                     # an earlier run's project root
    with run.SharedKernel() as kernel:
        kernel.prepare(first)                       # no kernel yet: nothing to do, nbclient starts it
        assert not kernel.km.has_kernel
        kernel.km.start_kernel(cwd=str(first), extra_arguments=run.KERNEL_ARGUMENTS)
        # what an earlier run left: a name, its output, and its progress channel
        left = "import os\nleftover = 1\nos.environ['LOOKALIKE_PROGRESS'] = 'stale'\nleftover\n"
        assert _in_kernel(kernel.km, left, "'leftover' in globals() and 'LOOKALIKE_TEST_GONE_LATER' in os.environ") == "True"
        monkeypatch.setenv(progress.CHANNEL, str(tmp_path / "this-run.txt"))
        monkeypatch.delenv(P.PROJECT_ENV, raising=False)
        monkeypatch.delenv("LOOKALIKE_TEST_GONE_LATER")
        monkeypatch.setenv("LOOKALIKE_TEST_SET_LATER", "yes")       # as a test that sets a variable before a run
        kernel.prepare(later)
        assert _in_kernel(kernel.km, expression="'leftover' in globals() or 'os' in globals()") == "False"
        assert _in_kernel(kernel.km, expression="len(Out)") == "0"
        assert _in_kernel(kernel.km, expression="__import__('os').getcwd()") == repr(str(later))
        env = "__import__('os').environ.get('{}')"
        assert _in_kernel(kernel.km, expression=env.format(progress.CHANNEL)) == repr(str(tmp_path / "this-run.txt"))
        assert _in_kernel(kernel.km, expression=env.format(P.PROJECT_ENV)) == "None"
        assert _in_kernel(kernel.km, expression=env.format("LOOKALIKE_TEST_GONE_LATER")) == "None"
        assert _in_kernel(kernel.km, expression=env.format("LOOKALIKE_TEST_SET_LATER")) == "'yes'"
        kernel.km.signal_kernel(signal.SIGKILL)     # a kernel that died: the next stage starts a new one
        deadline = time.monotonic() + 30
        while kernel.km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        kernel.prepare(later)
        assert not kernel.km.has_kernel
        kernel.km.start_kernel(cwd=str(later), extra_arguments=run.KERNEL_ARGUMENTS)   # as nbclient would
        assert _in_kernel(kernel.km, expression="__import__('os').getcwd()") == repr(str(later))


@pytest.mark.slow
def test_a_stage_kernel_is_not_interrupted_on_its_way_down_but_can_be_interrupted_while_up(tmp_path):
    """jupyter_client sends SIGINT to every kernel it shuts down; one landing while the kernel answered a
    message printed "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel." after a stage that went
    well (seen in test_a_stage_prints_no_kernel_warning, now and then)."""
    sent: list[int] = []
    km = run.kernel_manager_class(blocking=True)(kernel_name="python3")
    real = km._async_signal_kernel

    async def recording(signum):
        sent.append(signum)
        await real(signum)

    km._async_signal_kernel = recording
    km.start_kernel(cwd=str(tmp_path), extra_arguments=run.KERNEL_ARGUMENTS)
    try:
        km.interrupt_kernel()                       # while up, an interrupt is still sent
        assert sent == [signal.SIGINT]
        km.shutdown_kernel(now=False)
        assert sent == [signal.SIGINT]              # the shutdown sent none
        assert not km.is_alive()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_failing_stage_stops_the_run_and_keeps_the_partial_notebook(tmp_path, capsys):
    from lookalike.cli import main

    params = write_params(tmp_path / "broken.yaml",
                          f"run: broken\ncorpus:\n  source: manifest\n  manifest: {tmp_path / 'absent.csv'}\n")
    code = main(["run", str(params), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1
    assert "stage 01_stratify_corpus failed" in err and "absent.csv: manifest not found" in err
    partial = tmp_path / "out" / "broken" / "notebooks" / "01_stratify_corpus.ipynb"
    assert partial.is_file() and str(partial) in err
    # the run still leaves its pages: the failed stage, its error and what to do, and what did not run
    index = (tmp_path / "out" / "broken" / "index.html").read_text(encoding="utf-8")
    assert "Stage 01_stratify_corpus failed" in index and "absent.csv: manifest not found" in index
    assert "02_encode: did not run" in index
    assert "This run did not finish" in (tmp_path / "out" / "broken" / "summary.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("stage", run.STAGES)
def test_stored_ci_notebook_runs_the_source_code(stage):
    """nbval executes the stored notebook; it must be the source notebook plus the runner's parameters."""
    stored_path = REPO / "outputs" / "ci" / "notebooks" / f"{stage}.ipynb"
    assert stored_path.is_file(), f"run `make report RUN=ci` and commit {stored_path.relative_to(REPO)}"
    stored = nbformat.read(stored_path, as_version=4)
    source = nbformat.read(REPO / "notebooks" / f"{stage}.ipynb", as_version=4)
    stored_cells = [c for c in stored.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    assert [(c.cell_type, c.source) for c in stored_cells] == [(c.cell_type, c.source) for c in source.cells]
    injected = next(c for c in stored.cells if "injected-parameters" in c.metadata.get("tags", []))
    expected = run.stage_parameters(stage, P.load_params(REPO / "params" / "ci.yaml"))
    namespace: dict = {}
    exec(injected.source, namespace)
    assert {k: namespace[k] for k in expected} == expected
    assert set(namespace) - {"__builtins__"} == set(expected)


def test_source_notebooks_carry_no_outputs():
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code"), path.name


_WARNING = re.compile(r"\b\w*Warning\b")
_MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:home|root|tmp|work|usr|opt|var|Users|private)/")
_PROGRESS_BAR = re.compile(r"\d+/\d+ \[\d+:\d+<")                             # tqdm's "300/300 [00:01<00:00"


def _dirty(text: str) -> list[str]:
    return sorted({m.group() for pattern in (_WARNING, _MACHINE_PATH, _PROGRESS_BAR) for m in pattern.finditer(text)})


def test_stored_ci_notebooks_carry_no_warning_and_no_machine_path():
    for path in sorted((REPO / "outputs" / "ci" / "notebooks").glob("*.ipynb")):
        outputs = json.dumps([c.get("outputs", []) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]])
        assert _dirty(outputs) == [], path.name


def test_clean_output_check_sees_a_warning_and_a_path():
    assert _dirty("TqdmWarning: IProgress not found") == ["TqdmWarning"]
    assert _dirty("cache at /root/.cache/lookalike") == ["/root/"]
    assert _dirty("see ../outputs/ci/tables and $M figures") == []
    assert _dirty("OCR: 100%|#####| 300/300 [00:01<00:00, 250.0page/s]") == ["300/300 [00:01<"]


def test_a_failing_stage_keeps_its_partial_notebook_with_the_error(tmp_path, monkeypatch):
    # the runner writes a stage notebook once, at the end, not after every cell: a failure must
    # still leave the cells that ran and the error in the kept notebook
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("run_dir = ''", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("print('first cell ran')"),
                nbformat.v4.new_code_cell("raise ValueError('a planted failure')"),
                nbformat.v4.new_code_cell("print('never')")]
    (tmp_path / "src").mkdir()
    nbformat.write(nb, tmp_path / "src" / "99_boom.ipynb")
    monkeypatch.setattr(run, "NOTEBOOK_DIR", tmp_path / "src")
    nb_dir = tmp_path / "out" / "notebooks"
    nb_dir.mkdir(parents=True)
    with pytest.raises(run.StageFailed, match="a planted failure") as failed:
        run._run_stages(["99_boom"], {"99_boom": {"run_dir": str(tmp_path / "out")}}, {"run": "t"}, nb_dir,
                        tmp_path / "out", lambda *_: None)
    kept = failed.value.notebook.read_text(encoding="utf-8")
    assert "first cell ran" in kept and "a planted failure" in kept and "never\\n" not in kept


def test_evidence_qrels_reproduce_the_first_look_with_the_cli(ci_run, capsys):
    """The command the README gives: lookalike eval -c on qrels/evidence.qrels and runs/NAME.run prints
    tables/systems.csv's figures for NAME (to the 4 decimals trec_eval prints)."""
    from lookalike.cli import eval as eval_cli

    systems = pd.read_csv(ci_run / "tables" / "systems.csv")
    assert (ci_run / "qrels" / "evidence.qrels").is_file()
    for row in systems.itertuples():
        capsys.readouterr()
        assert eval_cli.main(["-c", "-m", "recall.10", "-m", "ndcg_cut.10", "-m", "recall_all.10",
                              str(ci_run / "qrels" / "evidence.qrels"), str(ci_run / "runs" / f"{row.system}.run")]) == 0
        printed = {line.split()[0]: line.split()[2] for line in capsys.readouterr().out.splitlines()}
        assert printed == {"recall_10": f"{row.recall_10:.4f}", "ndcg_cut_10": f"{row.ndcg_cut_10:.4f}",
                           "recall_all_10": f"{row.recall_all_10:.4f}"}, row.system


def test_a_second_run_of_a_folder_being_written_is_refused_and_a_misspelt_stage_makes_no_folder(tmp_path, capsys):
    """Two `lookalike run`s of one run name at once both reported success, the folder holding the second's
    files only; `run --stage 09_bogus` made the run folder before refusing the name."""
    from lookalike.cli import main
    from tests.report.test_run_folder import _hold_lock

    params = write_params(tmp_path / "mine.yaml", f"run: mine\ncorpus:\n  source: manifest\n"
                                                   f"  manifest: {tmp_path / 'absent.csv'}\n")
    assert main(["run", str(params), "--out", str(tmp_path / "out"), "--stage", "09_bogus"]) == 2
    assert "unknown stage(s) ['09_bogus']" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    (tmp_path / "out" / "mine" / "notebooks").mkdir(parents=True)
    holder = _hold_lock(tmp_path / "out" / "mine")
    try:
        assert main(["run", str(params), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert "is being written by another lookalike run" in err and f"process {holder.pid}" in err
        assert sorted(p.name for p in (tmp_path / "out" / "mine").iterdir()) == [".lookalike-run.lock", "notebooks"]
    finally:
        holder.kill()
        holder.wait()


def test_a_full_disk_ends_the_run_with_one_line(tmp_path, monkeypatch, capsys):
    """A full disk (or a file-size limit) while the runner writes its pages ended in a traceback."""
    from lookalike.cli import run as runner

    def full(*a, **k):
        raise OSError(28, "No space left on device", str(tmp_path / "out" / "index.html"))

    monkeypatch.setattr(runner, "execute", full)
    assert runner.main(str(tmp_path / "p.yaml"), str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "writing the run folder failed" in err and "No space left on device" in err
