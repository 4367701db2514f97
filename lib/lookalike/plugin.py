"""The stable surface for people who write an encoder or a judge for lookalike.

Import from here, not from lookalike's inner modules: these names keep their meaning across
releases, while the modules behind them may move.

Encoders (named in params as "package.module:Class" or "path/to/file.py:Class"; see
examples/plugin_encoder/hashed_ocr.py, which imports nothing else from lookalike):

  Encoder        the base class: set ``name``, ``provenance``, ``kind``, ``revision`` and write
                 ``encode_units`` / ``encode_queries`` (optionally ``encode_captions``)
  Vectors        what they return (encoder id, provenance, ids, matrix or text, kind, stats)
  EncodeError    raise it with the item and the reason when an input cannot be encoded
  PROVENANCES    the provenances an index may declare (pixels, caption-text, query-text, ...)
  Cache          the content-hash cache the runner hands to encode_units
  resolve_image  a unit's image_path resolved against the corpus folder
  ocr_texts      lookalike's OCR of a list of image paths (cached per image content, shared with
                 the built-in OCR systems): (texts, stats)
  default_ocr_engine  the OCR engine lookalike uses on this machine

Judges (labels for (question, unit) pairs):

  Judge, Judgement, Capabilities, JudgeError   the protocol, what judge() returns, what a judge
                 reads and needs, and the error for a label it cannot give
  ABSTAIN        the label of a judgement the judge cannot make (it cannot see what a label needs)
  register_judge(name, worth)   class decorator entering a judge in the registry under name; list
                 its module in the run's ``plugins`` key (imported before the parameters are
                 checked, and in every stage), then name it in params like any built-in judge
  A judge class is also named by import path, as an encoder is ("package.module:Class" or
  "path/to/file.py:Class"); see examples/plugin_judge/word_overlap.py.

Corpus sources (where the units come from):

  register_source(name, needs="root")   function decorator entering a corpus loader as
                 ``corpus.source: name``: it takes (root folder, corpus options) and returns a
                 DataFrame of manifest rows (image_path, unit_id or doc_id + page, optional metadata),
                 checked as a manifest's rows are; list its module in ``plugins``. See
                 examples/plugin_source/jsonl_pages.py.
  CorpusError    raise it when the source as a whole cannot be read (a row's problem is said per row)
"""

from __future__ import annotations

from lookalike.data.schema import CorpusError, resolve_image
from lookalike.io.corpus import register_source
from lookalike.io.cache import Cache
from lookalike.judging.judges import ABSTAIN, Capabilities, Judge, JudgeError, Judgement
from lookalike.judging.judges import register as register_judge
from lookalike.retrieval.encoders.base import PROVENANCES, EncodeError, Encoder, Vectors
from lookalike.retrieval.encoders.ocr import default_engine as default_ocr_engine
from lookalike.retrieval.encoders.ocr import ocr_many as ocr_texts

__all__ = ["Encoder", "Vectors", "EncodeError", "PROVENANCES", "Cache", "resolve_image", "ocr_texts",
           "default_ocr_engine", "ABSTAIN", "Judge", "Judgement", "Capabilities", "JudgeError", "register_judge",
           "register_source", "CorpusError"]
