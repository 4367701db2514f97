"""The run parameters as declared types: every key a run may set, with its type, its default, the values
it allows and what it does, written once here. ``lookalike.params`` reads everything from these classes —
the defaults a run file is merged over, the constraints it is checked against, the frozen configuration the
stages read (``ctx.config.encode.device``, seen by the type checker) — and writes ``base.yaml`` and
``docs/parameters.md`` from them (``make docs``; a test fails when either differs).

Plain frozen dataclasses, not pydantic models: the checking (deep merge, a key's type fixed by its default,
registry names resolved when a run is checked) is ``lookalike.params``'s and states its errors in the
project's words — a key, its file, what is allowed — so a model library would add a second way of checking
beside the one users already read. ``allowed`` is a constraint in the language ``lookalike.params``
documents ({one of: ...}, {>= 1}, {names: judge}, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


def key(default: Any, doc: str, allowed: str = "") -> Any:
    """One parameter: its default (which also fixes its type in a run file), what it does, and the
    values it allows (empty: any value of its type)."""
    meta = {"doc": doc, "allowed": allowed}
    if isinstance(default, Mapping):
        return field(default_factory=lambda: MappingProxyType(dict(default)), metadata=meta)
    return field(default=default, metadata=meta)



@dataclass(frozen=True)
class StatsParams:
    """How intervals and tests resample."""

    cluster: str = key("document",
            "what bootstrap CIs and randomisation tests resample: each question's gold document (default), its "
            "template, or each question alone",
            allowed="one of: document, template, none")


@dataclass(frozen=True)
class CorpusParams:
    """Where the units and questions come from, and how they are read."""

    source: str = key("demo",
            "demo (built-in generator) | manifest | pdf (a folder of PDFs) | images (a folder of images) | beir (a "
            "BEIR-style folder) | vidore (a ViDoRe/MTEB parquet file) | a source registered in "
            "lookalike.io.corpus.SOURCES; see docs/own-corpus.md",
            allowed="names: corpus.source")
    demo_size: str = key("ci", "demo generator size: ci (~150 units) | demo (~600 units)", allowed="one of: ci, demo")
    manifest: str = key("",
            "manifest CSV or parquet: the units when source is manifest; with pdf / images / beir / vidore, "
            "metadata by unit_id or doc_id")
    root: str = key("",
            "manifest: folder image paths are relative to (\"\" = the manifest's folder); pdf / images / beir: the "
            "folder; vidore: the parquet file")
    strict: bool = key(False, "true: a bad manifest row stops the run; false: it is skipped and reported")
    dpi: int = key(110, "pdf: render resolution (dots per inch)", allowed=">= 20")
    pages: str = key("", "pdf: pages to keep per document, 1-based ranges like \"1-5,9\"; \"\" keeps all")
    max_pages: int = key(0, "pdf: at most this many pages per document (after pages); 0 = no cap", allowed=">= 0")
    name_pattern: str = key("",
            "pdf / images: regex with named groups (entity, period, metric, template_id, revision, content_type) "
            "read from file names")
    max_pixels: int = key(40000000,
            "every page image (image folders, manifests, BEIR, ViDoRe, PDF pages at corpus.dpi): larger ones are "
            "skipped and reported",
            allowed=">= 1")
    questions: str = key("",
            "your questions: JSONL or CSV (query_id, text, optional answer, evidence_structure, register)")
    question_columns: str = key("", "field=column mapping for other column names, e.g. \"text=Question,answer=Answer\"")
    question_ids: str = key("q{row:04d}", "id template when the questions have no query_id column (row counts from 0)")
    qrels: str = key("",
            "your judgements: TREC qrels, or CSV/TSV with a header; graded or sufficient/supporting/irrelevant")
    qrels_level: str = key("page",
            "page (ids are doc:page units) | document (ids are documents, scored by their best page)",
            allowed="one of: page, document")
    page_base: int = key(1,
            "what page numbers start at in every file you bring (qrels, runs, blind queries, regression reports, "
            "human labels); a file that contradicts it is refused",
            allowed="one of: 0, 1")


@dataclass(frozen=True)
class QuestionsParams:
    """Cleaning the questions before validation (stage 05)."""

    clean: str = key("flag",
            "query cleaning before validation (stage 05): questions that point at the page (\"in the table\", "
            "\"above\"), are not closed (\"describe ...\"), or are unclear (too short, a pronoun with no "
            "antecedent) are flagged and reported per rule; drop also leaves them out of validation (listed, never "
            "silently)",
            allowed="one of: flag, drop")


@dataclass(frozen=True)
class SampleParams:
    """The labelled sample stage 01 draws."""

    per_stratum: int = key(6, "units drawn per content_type stratum for the labelled sample", allowed=">= 0")


@dataclass(frozen=True)
class EncodeParams:
    """The encoders of stage 02, where they run, and what page text they read."""

    encoders: tuple[str, ...] = key(("ocr-minilm", "ocr-bm25", "caption-minilm", "appearance"),
            "encoders run in stage 02: built-in names (add colpali, clip or bi with a model, endpoint with a "
            "server) or a plug-in \"package.module:Class\" / \"path/to/file.py:Class\" (docs/encoders.md: bring "
            "your own encoder)",
            allowed="non-empty; each: matches: \\S+")
    ocr_engine: str = key("",
            "tesseract or rapidocr; empty picks tesseract when installed",
            allowed="one of: '', tesseract, rapidocr")
    text_source: str = key("auto",
            "where page text comes from: auto reads a PDF page's own text layer when it is usable and OCRs the "
            "rest; text-layer reads only text layers (pages without one get no text); ocr OCRs every page",
            allowed="one of: auto, text-layer, ocr")
    device: str = key("auto",
            "auto picks CUDA with bf16 when present, else CPU fp32",
            allowed="matches: auto|cpu|cuda(:[0-9]+)?")
    batch_size: int = key(32, "encoder batch size", allowed=">= 1")
    workers: int = key(0,
            "OCR worker processes (with engine ray: OCR and CPU encoder actors); 0 means one per core (of the Ray "
            "cluster)",
            allowed=">= 0")
    engine: str = key("local",
            "where stage 02 encodes the pages: local (this process; OCR in worker processes) or ray (Ray Data "
            "actors into the same cache, then read back; the same vectors and tables)",
            allowed="one of: local, ray")
    ray_address: str = key("",
            "engine ray: the cluster to connect to (e.g. ray://head:10001 or head:6379); empty starts a local "
            "cluster with this machine's cores")
    ray_object_store_mb: int = key(512,
            "engine ray, local cluster: Ray's object store size (set explicitly: a container's small /dev/shm is a "
            "known trap)",
            allowed=">= 64")
    cache_dir: str = key("", "OCR and vector cache; empty means ~/.cache/lookalike or LOOKALIKE_CACHE")
    colpali_model: str = key("", "local folder or hub id of a ColPali-family model, used by the colpali encoder")
    colpali_family: str = key("",
            "ColPali, ColQwen2, ColIdefics3 or ColModernVBert; empty reads it from the model config",
            allowed="one of: '', ColPali, ColQwen2, ColIdefics3, ColModernVBert")
    endpoint_url: str = key("",
            "base URL of an OpenAI-compatible embeddings server (e.g. http://host:8000/v1), used by the endpoint "
            "encoder")
    endpoint_model: str = key("", "the model name that server serves, used by the endpoint encoder")
    endpoint_api_key_env: str = key("LOOKALIKE_EMBEDDINGS_API_KEY",
            "the environment variable holding the endpoint's API key (the key itself is never written anywhere)")
    endpoint_dimensions: int = key(0, "dimensions to ask the endpoint for; 0 = the model's own", allowed=">= 0")
    endpoint_image_prompt: str = key("", "text sent with each page image (some multimodal embedding models expect one)")
    settings: Mapping[str, Any] = key({},
            "per-encoder settings by system name, merged into that encoder's own: {clip: {model: /models/siglip2}, "
            "bi: {model: /models/bipali}, my-encoder: {dim: 256}}; a plug-in gets them as constructor keywords "
            "(docs/encoders.md: bring your own encoder)")


@dataclass(frozen=True)
class RetrieveParams:
    """Ranking: depth, fusion, and multi-vector search."""

    depth: int = key(100, "ranking depth kept per query", allowed=">= 1")
    rrf_k: int = key(60, "reciprocal rank fusion constant", allowed=">= 0")
    memory_budget_mb: int = key(512, "MaxSim block memory budget", allowed=">= 1")
    search: str = key("exact",
            "multi-vector search: exact MaxSim over every page, or candidates (each question's retrieve.candidates "
            "best pages by MaxSim against per-page centroids, computed in int8, then exact MaxSim on those): "
            "approximate, so stage 02 reports its candidate recall against exact",
            allowed="one of: exact, candidates")
    candidates: int = key(200, "candidates: pages per question scored exactly", allowed=">= 1")
    centroids: int = key(64, "candidates: centroids per page for the first stage", allowed=">= 1")
    recall_sample: int = key(100,
            "candidates: questions sampled (seeded) for the candidate recall against exact MaxSim",
            allowed=">= 1")
    external_runs: tuple[str, ...] = key((),
            "runs of your own retrievers, \"name=path/to/file.run\" (TREC format), evaluated like built-in systems",
            allowed="each: matches: [A-Za-z0-9][A-Za-z0-9._+-]*\\s*=\\s*\\S.*")


@dataclass(frozen=True)
class RerankParams:
    """Re-scoring each question's top results, giving <system>+rerank systems."""

    systems: tuple[str, ...] = key((),
            "systems whose top rerank.depth is re-scored, each giving <system>+rerank through stages 06-08 (any "
            "system of the run: an encoder's, a fusion, your run); [] = no reranking")
    method: str = key("endpoint",
            "endpoint (a /v1/rerank server: Jina, Cohere, vLLM) | cross-encoder (a local sentence-transformers "
            "CrossEncoder over OCR text) | maxsim (re-score with a multi-vector encoder of the run)",
            allowed="one of: endpoint, cross-encoder, maxsim")
    depth: int = key(25,
            "top k of each question's base ranking that is re-scored (the rest keeps its order below)",
            allowed=">= 1")
    url: str = key("", "endpoint: the server's base URL, e.g. http://host:8000/v1")
    model: str = key("", "endpoint: the served model name; cross-encoder: a local folder (or hub id) of a CrossEncoder")
    api_key_env: str = key("LOOKALIKE_RERANK_API_KEY",
            "endpoint: the environment variable holding the key (never written anywhere)")
    maxsim_encoder: str = key("colpali",
            "maxsim: the multi-vector system whose page and query vectors re-score (it must be in encode.encoders)")


@dataclass(frozen=True)
class SplitParams:
    """Query splitting by a chat endpoint, giving <system>+split systems."""

    systems: tuple[str, ...] = key((),
            "encoded systems run with query splitting, each giving <system>+split; [] = none")
    url: str = key("",
            "an OpenAI-compatible chat endpoint's base URL that decomposes each question into sub-queries; empty: "
            "+split systems are skipped with a note")
    model: str = key("", "the chat model name")
    api_key_env: str = key("LOOKALIKE_SPLIT_API_KEY",
            "the environment variable holding the key (never written anywhere)")
    max_subqueries: int = key(4, "sub-queries kept per question", allowed=">= 1")


@dataclass(frozen=True)
class ReportParams:
    """Stage 07's report: the source column, the target corpus size, the haystack curve."""

    source_column: str = key("content_type",
            "the units column that names a question's source (document type, collection) for stage 07's RecallAll@5 "
            "source x evidence-structure heatmap; a question's source is its first evidence unit's")
    target_corpus_size: int = key(0,
            "the corpus size the figures must hold at: stage 07's haystack curve extrapolates recall@10 and top-1 "
            "to it (a line in log corpus size, drawn dashed, with its interval); 0 = this corpus's size (no "
            "extrapolation)",
            allowed=">= 0")
    haystack_fractions: tuple[float, ...] = key((0.1, 0.25, 0.5, 1.0),
            "nested random subsamples of the corpus the haystack curve ranks every question against (each "
            "question's gold and hard distractors always kept)",
            allowed="non-empty; each: (0..1]")


@dataclass(frozen=True)
class LeakParams:
    """The leak ablation (stage 03) and its CI gate."""

    threshold: float = key(0.05,
            "gate: LEAK when the image index's paired caption-derived minus blind recall@10 has its 95% CI above 0 "
            "and exceeds this",
            allowed="0..1")
    gate_units: int = key(200,
            "units the leak-check gate samples (seeded); 60 missed 2 of 3 gross leaks on the ci corpus "
            "(benchmarks/leak_gate_power.py)",
            allowed=">= 1")
    inject_caption_leak: bool = key(False,
            "fault injection (caption-index): the image path encodes the caption fields instead of the pixels (the "
            "gate must fail)")
    pool_depth: int = key(10, "top k of every system pooled for blind judging", allowed=">= 1")
    blind_queries: str = key("",
            "your blind queries (CSV: query_id, unit_id, text, register); empty builds them from metadata")
    shuffled_runs: tuple[str, ...] = key((),
            "the metadata probe for your runs: \"name=path\", your retriever's run (name as in "
            "retrieve.external_runs) on the corpus lookalike leak-check --shuffled-corpus wrote; any ranking that "
            "changes is a LEAK",
            allowed="each: matches: [A-Za-z0-9][A-Za-z0-9._+-]*\\s*=\\s*\\S.*")


@dataclass(frozen=True)
class NegativesParams:
    """Hard negatives (stage 04): look-alikes by template, appearance cluster, and random contrast."""

    k: int = key(3, "hard distractors kept per axis, nearest by appearance", allowed=">= 1")
    random: int = key(9, "random negatives per gold for the contrast", allowed=">= 0")
    clusters: int = key(12, "clusters for the fallback when the corpus has no template metadata", allowed=">= 1")
    cluster_k: int = key(20,
            "look-alikes per gold from its appearance cluster (nearest first) where no template names them; a hard "
            "set of 5 or fewer is outside the hard columns",
            allowed=">= 1")
    template_k: int = key(200,
            "look-alikes per gold from its template: all of a template's other units while there are at most this "
            "many, else this many of them in a fixed hash order (labels per question stay bounded as templates grow "
            "with the corpus)",
            allowed=">= 1")


@dataclass(frozen=True)
class ValidateParams:
    """Question validation (stage 05): its judges and your regressions."""

    judge: str = key("auto",
            "auto | reference (the demo's answer key) | answer-string | human | openai-compatible | a plug-in "
            "judge; auto: reference when the run has an answer key, else answer-string",
            allowed="names: judge, auto")
    compare_judge: str = key("answer-string",
            "second judge on the same pairs, for agreement (kappa); \"\" for none",
            allowed="names: judge, ''")
    labels: str = key("", "human judge: CSV of query_id, unit_id, label (sufficient | supporting | irrelevant)")
    max_repairs: int = key(3,
            "qualifiers added per question before it is kept as any-acceptable or dropped",
            allowed=">= 0")
    regressions: str = key("",
            "failures users reported (CSV: text, expected_unit_id, optional returned_unit_id, query_id, system, "
            "note)")


@dataclass(frozen=True)
class JudgesParams:
    """The judge endpoint every stage that judges uses (stages 05, 06, 08)."""

    url: str = key("",
            "openai-compatible judge: base URL, e.g. http://localhost:8000/v1 (key from LOOKALIKE_JUDGE_API_KEY)")
    model: str = key("", "openai-compatible judge: served model name")
    samples: int = key(1,
            "openai-compatible judge: replies per judgement; the label is their majority (ties to the lower label)",
            allowed=">= 1")
    temperature: float = key(0.0,
            "openai-compatible judge: sampling temperature (recorded with every label)",
            allowed="0..2")
    timeout_s: float = key(60.0,
            "openai-compatible judge: seconds to wait for one reply before the attempt counts as failed",
            allowed=">= 1")
    max_attempts: int = key(4,
            "openai-compatible judge: attempts per judgement (with exponential backoff between them); a hanging "
            "endpoint costs at most about timeout_s x max_attempts per pair",
            allowed=">= 1")


@dataclass(frozen=True)
class LabelsParams:
    """The judge pool and people's labels (stage 06, the label server)."""

    pool_depth: int = key(10,
            "top k of every system pooled per validated question (plus its hard candidates)",
            allowed=">= 1")
    model_judge: str = key("answer-string",
            "pre-labels: answer-string | openai-compatible (uses judges.url / judges.model) | a plug-in judge whose "
            "labels are a model's",
            allowed="names: judge[model]")
    adjudicator: str = key("auto",
            "auto | reference | none; auto: the demo's answer key when the run has one, else none (people "
            "adjudicate)",
            allowed="one of: auto, reference, none")
    page_items: int = key(120, "pairs on the labelling page: unadjudicated first, then a seeded sample", allowed=">= 0")
    db: str = key("",
            "the team label database (lookalike labels serve): '' is <run>/labels/labels.sqlite; a path, or "
            "postgresql://user@host/db; stage 06 reads its labels into the store when it exists")
    per_pair: int = key(1,
            "people who label each pooled pair in each pool on the label server (2 or more gives inter-annotator "
            "agreement); seeds a new label database, which then holds it",
            allowed=">= 1")
    door: bool = key(False,
            "the judge door with people: the metadata pool sees each page's file name and caption beside it; seeds "
            "a new label database, which then holds it")
    door_share: float = key(0.5,
            "with door on: the share of the people `lookalike labels plan` puts in the metadata pool",
            allowed="(0..1]")
    lease_minutes: int = key(15,
            "how long a pair shown to one person is held for them before another may take its slot",
            allowed=">= 1")


@dataclass(frozen=True)
class MiningParams:
    """Mined candidates (stage 08): the retriever mined, its judges, and the rules compared."""

    retriever: str = key("ocr-minilm",
            "system whose rankings are mined (stage 02's runs for questions as generated, stage 06's for validated "
            "ones)")
    question_set: str = key("generated",
            "generated | validated: the set the rules table and the training export use (both are mined and "
            "reported)",
            allowed="one of: generated, validated")
    depth: int = key(100, "mined candidates per question, gold removed", allowed=">= 1")
    judge: str = key("auto",
            "auto | reference | answer-string | openai-compatible | a plug-in judge whose labels are a model's or "
            "an answer key's; auto: reference when the run has an answer key",
            allowed="names: judge[model|reference], auto")
    compare_judge: str = key("answer-string",
            "second judge on the same candidates; \"\" for none",
            allowed="names: judge[model|reference], ''")
    judge_top: int = key(20,
            "the judging budget: top mined candidates the judge labels (what the judged rule may see)",
            allowed=">= 0")
    negatives: int = key(4, "negatives per question every rule chooses (equal count)", allowed=">= 1")
    alphas: tuple[float, ...] = key((0.9, 0.95, 0.99),
            "TopK-PercPos: keep candidates scored below alpha x the positive's score",
            allowed="each: (0..1]")
    windows: tuple[str, ...] = key(("4-20", "21-100"),
            "rank windows sampled uniformly (seeded)",
            allowed="each: matches: [1-9][0-9]*-[1-9][0-9]*")


@dataclass(frozen=True)
class Config:
    """A run's parameters: the run-wide keys, then one section per part of the pipeline."""

    run: str = key("ci",
            "run name, a plain folder name of at most 100 characters; outputs go to outputs/<run>/",
            allowed="matches: (?!\\.\\.?$)[A-Za-z0-9._-]+; length <= 100")
    title: str = key("lookalike report", "heading of the report site")
    seed: int = key(7, "seeds every random draw of the run", allowed=">= 0")
    plugins: tuple[str, ...] = key((),
            "modules imported before the run is checked and in every stage, so that what they register (a judge "
            "entered with lookalike.plugin.register_judge) can be named in this file: \"package.module\" or "
            "\"path/to/file.py\" (relative to the repository root or the working directory)",
            allowed="each: matches: \\S+")
    stats: StatsParams = field(default_factory=StatsParams)
    corpus: CorpusParams = field(default_factory=CorpusParams)
    questions: QuestionsParams = field(default_factory=QuestionsParams)
    sample: SampleParams = field(default_factory=SampleParams)
    encode: EncodeParams = field(default_factory=EncodeParams)
    retrieve: RetrieveParams = field(default_factory=RetrieveParams)
    rerank: RerankParams = field(default_factory=RerankParams)
    split: SplitParams = field(default_factory=SplitParams)
    report: ReportParams = field(default_factory=ReportParams)
    leak: LeakParams = field(default_factory=LeakParams)
    negatives: NegativesParams = field(default_factory=NegativesParams)
    validate: ValidateParams = field(default_factory=ValidateParams)
    judges: JudgesParams = field(default_factory=JudgesParams)
    labels: LabelsParams = field(default_factory=LabelsParams)
    mining: MiningParams = field(default_factory=MiningParams)


# section name -> its class, in the schema's order (base.yaml's and docs/parameters.md's)
SECTIONS: dict[str, type] = {
    "stats": StatsParams, "corpus": CorpusParams, "questions": QuestionsParams, "sample": SampleParams,
    "encode": EncodeParams, "retrieve": RetrieveParams, "rerank": RerankParams, "split": SplitParams,
    "report": ReportParams, "leak": LeakParams, "negatives": NegativesParams, "validate": ValidateParams,
    "judges": JudgesParams, "labels": LabelsParams, "mining": MiningParams,
}
