"""What every stage function takes and returns.

``run(ctx) -> StageResult``: ctx carries the run folder and the run's checked parameters; the
result holds the stage's tables (name -> frame, written to tables/<name>.csv by ``save``), its
figures (Altair charts and PIL images, written to figures/), frames and text blocks to show, and
its headline (the sentence and key numbers index.html shows). A notebook calls the function,
shows what the result holds section by section, then calls ``result.save()``; tests call the
function directly.
"""

from __future__ import annotations

import functools
import html
import sys

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import pandas as pd

from lookalike import params as P
from lookalike.config import Config
from lookalike.eval import stats
from lookalike.report import run_folder
from lookalike.report import tables as readable
from lookalike.report.summary import nouned, nouned_html
from lookalike.vocab import unit_noun


@dataclass
class StageContext:
    """The run folder and the run's parameters (merged over params/base.yaml and checked)."""

    run_dir: Path
    params: dict[str, Any]

    def __post_init__(self):
        self.run_dir = Path(self.run_dir)
        self.dirs = run_folder.run_dirs(self.run_dir)

    def get(self, dotted: str) -> Any:
        """One parameter by its dotted name: ctx.get("encode.ocr_engine"). For the command line's checks,
        which name keys in their messages; the stages read ctx.config (a test keeps them to it)."""
        value: Any = self.params
        for part in dotted.split("."):
            value = value[part]
        return value

    def path(self, dotted: str) -> Path | None:
        """A path parameter resolved the one way paths are: relative to the repository root; None if empty."""
        return P.repo_path(self.get(dotted))

    @functools.cached_property
    def config(self) -> Config:
        """The parameters as the schema's frozen dataclasses (params.typed, lookalike.config): ctx.config.encode.device."""
        return P.typed(self.params)

    def encoder_settings(self) -> dict:
        """Every encoder's settings as the user set them (device, batch size, models, per-encoder
        settings): one function for every stage, so stages 02-08 build the same encoders (and ids)."""
        from lookalike.retrieval import systems

        return systems.run_settings(self.config.encode)

    def judge_settings(self, cache_root: Path) -> dict:
        """The judge endpoint's settings every stage that judges passes to make_judge: url, model, samples,
        temperature, timeout and attempts, and where replies are cached (one place, so stages 05, 06 and 08
        judge with the same endpoint settings)."""
        j = self.config.judges
        return dict(url=j.url, model=j.model, samples=j.samples, temperature=j.temperature, timeout_s=j.timeout_s,
                    max_attempts=j.max_attempts, cache_dir=Path(cache_root) / "judges")

    @property
    def seed(self) -> int:
        """The run's seed: every random draw of every stage starts from it."""
        return int(self.params["seed"])

    def table(self, name: str) -> pd.DataFrame:
        """An earlier stage's table, every column as written (no NaN for empty cells)."""
        path = self.run_dir / "tables" / f"{name}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the stage that writes tables/{name}.csv has not run")
        return pd.read_csv(path, keep_default_na=False)

    def optional_table(self, name: str) -> pd.DataFrame | None:
        """An earlier stage's table when that stage wrote it (some tables are written only for some
        corpora: your judgements, the demo's answer key), else None."""
        return self.table(name) if self.has_table(name) else None

    def has_table(self, name: str) -> bool:
        """Whether an earlier stage wrote this table (tables/<name>.csv)."""
        return (self.run_dir / "tables" / f"{name}.csv").is_file()

    def clusters(self, gold: Mapping[str, str]) -> pd.Series | None:
        """query_id -> the cluster its intervals resample (stats.cluster: the gold unit's document,
        its template, or none), for the query -> gold unit mapping given."""
        return stats.query_clusters(gold, self.units(), self.get("stats.cluster"))

    def unit_clusters(self) -> dict[str, str] | None:
        """unit_id -> its cluster under stats.cluster (document or template), or None."""
        return stats.unit_clusters(self.units(), self.get("stats.cluster"))

    def units(self) -> pd.DataFrame:
        """tables/units.csv as stage 01 wrote it (page and revision as integers, empty cells as '')."""
        return pd.read_csv(self.run_dir / "tables" / "units.csv", keep_default_na=False,
                           dtype={"page": int, "revision": int})

    @functools.cached_property
    def noun(self) -> str:
        """What this run's pages call a unit (vocab.unit_noun): page, image or photo, from the corpus
        source and the content types stage 01 wrote (page before stage 01 has run)."""
        path = self.run_dir / "tables" / "units.csv"
        types = pd.read_csv(path, keep_default_na=False, usecols=["content_type"])["content_type"] \
            if path.is_file() else ()
        return unit_noun(str(self.config.corpus.source), types)

    def result(self, stage: str, title: str) -> StageResult:
        """The stage's result, speaking of units by this run's noun."""
        return StageResult(stage, title, self.run_dir, noun=self.noun)


def context(run_dir: Path | str, params: dict[str, Any] | None = None) -> StageContext:
    """A stage's context: params as the runner injects them (the full merged set), or, when none
    are given, params/base.yaml's defaults (every value checked either way)."""
    return StageContext(Path(run_dir), P.check(params or {}))


class _Shown(dict):
    """StageResult.show: a frame put here is kept as report.tables.Readable, so a notebook shows it
    in the report's one table style (other objects pass through)."""

    def __init__(self, stage: str = ""):
        super().__init__()
        self.stage = stage

    def __setitem__(self, name: str, value: Any) -> None:
        if isinstance(value, pd.DataFrame):
            value = readable.Readable(value, f"{self.stage}-show-{name}", what=name.replace("_", " "))
        super().__setitem__(name, value)


def _empty_chart(fig) -> bool:
    """An Altair chart whose every data frame (its own and its layers', facets', concatenations')
    has no rows: there is nothing to draw."""
    frames, stack = [], [fig]
    while stack:
        c = stack.pop()
        data = getattr(c, "data", None)
        if isinstance(data, pd.DataFrame):
            frames.append(data)
        for attr in ("layer", "hconcat", "vconcat", "concat"):
            stack.extend(getattr(c, attr, None) or [])
        spec = getattr(c, "spec", None)
        if spec is not None and hasattr(spec, "to_dict"):
            stack.append(spec)
    return bool(frames) and all(f.empty for f in frames)


@dataclass
class StageResult:
    """What a stage computed. ``text`` holds the plain-text blocks the notebook prints (the
    numbers nbval checks), ``show`` frames and objects to display, ``tables`` what ``save``
    writes, ``figures`` charts and images, ``headline`` what index.html says for the stage."""

    stage: str
    title: str
    run_dir: Path
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    # what depends on the machine and the cache, not the params (seconds, units/s, cache hits): kept
    # out of tables/ and out of the stored notebooks, so both stay byte-identical run to run
    timings: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    show: _Shown = field(default_factory=_Shown)
    # the same tables as people read them (estimate [lo, hi], n, fixed precision): name -> HTML
    html: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sentence: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)
    headline_figure: str = ""
    # what the run calls a unit (StageContext.noun): every sentence, table and headline the stage adds
    # says photo or image where the units are not pages (sections build in 'page'; add() renames)
    noun: str = "page"
    # pages written after the tables and figures they embed (stage 07's summary.html)
    after_save: list = field(default_factory=list)
    _section: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        self.show.stage = self.stage

    # -- building a result
    def section(self, name: str) -> StageResult:
        """Start a text block; later say() calls append to it."""
        self._section = name
        self.text.setdefault(name, "")
        return self

    def say(self, *parts: Any, sep: str = " ", end: str = "\n") -> None:
        """print() into the current text block."""
        said = sep.join(str(p) for p in parts)
        self.text[self._section] = self.text.get(self._section, "") + nouned(said, self.noun) + end

    def table(self, name: str, df: pd.DataFrame, sort_by: list[str] | None = None) -> pd.DataFrame:
        """Record a table this section writes (tables/<name>.csv when its stage saves), sorted stably by
        sort_by."""
        if sort_by:
            df = df.sort_values(sort_by, kind="mergesort")
        self.tables[name] = df.reset_index(drop=True)
        return self.tables[name]

    def html_table(self, name: str, df: pd.DataFrame, digits: int = 3, caption: str = "") -> None:
        """Keep an HTML rendering of df for the notebook and its report (CI triples folded into
        one 'estimate [lo, hi]' cell); the plain-text block nbval checks is built separately."""
        if not len(df):
            # n = 0: a sentence, not an empty table under its headers
            self.html[name] = f"<p>No rows: {html.escape(name.replace('_', ' '))} has nothing to show on this run.</p>"
            return
        shown = readable.with_ci(df)
        if "interval" in shown.columns and shown["interval"].nunique() == 1 and len(shown):
            # one wording for every row: said once, under the table, instead of in each row
            said = f"intervals: {shown['interval'].iloc[0]}"
            caption, shown = (f"{caption}; {said}" if caption else said), shown.drop(columns=["interval"])
        self.html[name] = nouned_html(readable.html_table(shown, f"{self.stage}-{name}", digits=digits,
                                                          caption=caption), self.noun)

    def figure(self, name: str, fig) -> None:
        """Keep a chart or image; a chart with no rows to draw is not kept (nothing is drawn at n = 0)."""
        if fig is not None and not (hasattr(fig, "to_dict") and _empty_chart(fig)):
            self.figures[name] = fig

    def headline(self, sentence: str, figure: str = "", numbers: dict[str, Any] | None = None) -> None:
        """The section's one-line headline for index.html, in this run's noun (page, image, photo), its figure
        and numbers."""
        self.sentence, self.headline_figure = nouned(sentence, self.noun), figure
        self.numbers = {nouned(str(k), self.noun): v for k, v in (numbers or {}).items()}

    def add(self, section: Section, *values: Any) -> Any:
        """Take in what one section built (its text blocks, tables, figures, shown frames, HTML, notes,
        headline) and hand back the values it computed for later sections: none -> None, one -> it,
        several -> the tuple. A stage's run() is a list of ``x = res.add(*some_section(...))``."""
        for name, block in section.text.items():
            if block or name in self.text:
                self.text[name] = self.text.get(name, "") + nouned(block, self.noun)
        clash = (set(self.tables) & set(section.tables)) | (set(self.figures) & set(section.figures))
        if clash:
            raise ValueError(f"{self.stage}: section {section.name!r} builds {', '.join(sorted(clash))} again")
        self.tables.update(section.tables)
        self.timings.update(section.timings)
        self.figures.update(section.figures)
        self.html.update({k: nouned_html(v, self.noun) for k, v in section.html.items()})
        for name, value in section.show.items():
            if self.noun != "page" and isinstance(value, readable.Readable):
                # the frame's words, not its field names: a column called page stays page
                words = [c for c in value.df.columns if pd.api.types.is_object_dtype(value.df[c])
                         or pd.api.types.is_string_dtype(value.df[c])]
                value.df = value.df.assign(**{c: value.df[c].map(lambda v: nouned(v, self.noun) if isinstance(v, str)
                                                                  else v) for c in words})
            dict.__setitem__(self.show, name, value)
        self.notes.extend(section.notes)
        self.after_save.extend(section.after_save)
        if section.sentence:
            self.headline(section.sentence, section.headline_figure, section.numbers)
        return None if not values else values[0] if len(values) == 1 else values

    # -- reading a result in a notebook
    def print(self, name: str) -> None:
        """Print one text block as it was built (no trailing newline of its own), in one write with its newline."""
        sys.stdout.write(self.text.get(name, "").rstrip("\n") + "\n")
        sys.stdout.flush()

    def table_html(self, name: str):
        """One HTML table for the notebook (IPython's HTML object: its plain-text form is fixed)."""
        from IPython.display import HTML

        return HTML(self.html.get(name, f"<p>No {html.escape(name.replace('_', ' '))} table on this run.</p>"))

    def display(self, name: str):
        """A figure for the notebook: charts as SVG (no Vega needed to read the notebook), images as they are."""
        fig = self.figures.get(name)
        if fig is None:
            return None
        if hasattr(fig, "to_dict"):
            import vl_convert as vlc
            from IPython.display import SVG

            return SVG(vlc.vegalite_to_svg(fig.to_dict()))
        return fig

    # -- writing it
    def save(self) -> None:
        """Write every table, figure and the headline into the run folder (only tables the stage's
        contract declares: stages.contracts)."""
        from lookalike.stages import contracts

        undeclared = contracts.undeclared_tables(self.stage, self.tables)
        if undeclared:
            raise contracts.ContractError(f"{self.stage} writes tables its contract does not declare: "
                                          f"{', '.join(undeclared)} (lookalike.stages.contracts)")
        for name, df in self.tables.items():
            run_folder.write_table(df, self.run_dir, name)
        for name, df in self.timings.items():
            (self.run_dir / "timings").mkdir(parents=True, exist_ok=True)
            with run_folder.replacing(self.run_dir / "timings" / f"{name}.csv") as tmp:
                df.to_csv(tmp, index=False, lineterminator="\n")
        for name, fig in self.figures.items():
            if hasattr(fig, "to_dict"):
                run_folder.save_chart(fig, self.run_dir, name)
            else:
                run_folder.save_image(fig, self.run_dir, name)
        run_folder.record_headline(self.run_dir, self.stage, self.title, self.sentence, figure=self.headline_figure,
                             numbers=self.numbers)
        for write in self.after_save:
            write()


class Section(StageResult):
    """What one section of a stage builds: the same building calls as StageResult (say, table,
    html_table, figure, show, headline), gathered under the section's name and handed to the stage's
    result with ``res.add``. A section function takes its inputs as arguments (frames, typed
    parameters, values earlier sections computed), never the stage context, and returns
    ``(section, *values)`` so it can be called and checked on its own."""

    def __init__(self, stage: str, name: str):
        super().__init__(stage, "", Path("."))
        self.name = name
        self.section(name)

    def save(self) -> None:
        """Refused: a section is saved with its stage's result (StageResult.add), never on its own."""
        raise TypeError(f"section {self.name!r} of {self.stage} is saved with its stage's result (StageResult.add)")
