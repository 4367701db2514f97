"""lookalike: an honest evaluation workbench for visual retrievers.

The package is layered; a module imports only from its own subpackage and from the layers below
its own (tests/test_layers.py walks the import graph, function-level imports included, and fails
on any cycle or any import against this order). Lowest first:

  vocab, progress, registry, memory  the project's words (labels and grades, registers), the
                 terminal's progress bars, the one registry shape (name -> spec) pluggable things use,
                 with plug-ins named by import path, and the allocator setting the whole-corpus scoring
                 loops run under
  params         the run parameters' schema and typed configuration (a key naming a judge allows
                 what the registry holds when the run is checked)
  eval           the ranking rule, TREC formats, the measure registry and engine, statistics
  data           the units schema and the demo generator
  io             reading what users bring: corpora (manifest, PDF, images, BEIR, ViDoRe), questions,
                 judgements and runs; the content-hash cache
  report         writing what people read: tables, charts, images, the HTML site and pages
                 (templates are package data, rendered with jinja2)
  retrieval      encoders, indexes, MaxSim, fusion, document context, clustering, the systems' runs
  judging        judges (one protocol, a registry), the label store, the judge pool, agreement
  analysis       hard negatives, question validation, the leak ablation, sufficiency scoring, mining
  stages         one function per stage: run(ctx) -> StageResult; the notebooks call these
  api, plugin    the public surfaces: the Python API (re-exported here) and the plug-in authors' names
  cli            the runner (papermill) and the command line: run, eval, leak-check, labels
"""

__version__ = "0.1.0"

LAYERS = (("vocab", "progress", "registry", "config", "memory"), ("params",), ("eval",), ("data",), ("io",), ("report",), ("retrieval",), ("judging",),
          ("analysis",), ("stages",), ("api", "plugin"), ("cli",), ("__main__",))

# The public API (lookalike.api), loaded on first use so that `import lookalike` and the command line's
# start stay light: `lookalike.compare`, `lookalike.read_qrels`, ... import pandas only when asked for.
__all__ = ["Qrels", "Run", "read_qrels", "read_run", "parse_measure", "evaluate", "Evaluation", "compare", "Report",
           "open_run", "FinishedRun", "format_p", "Measure", "MeasureError", "TrecFormatError", "__version__"]


def __getattr__(name: str):
    if name in __all__ and name != "__version__":
        from lookalike import api

        return getattr(api, name)
    raise AttributeError(f"module 'lookalike' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
