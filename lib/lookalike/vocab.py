"""The project's words, stated once: label vocabulary and grades, registers, metric names.

Label semantics (../shared/DESIGN.md; the reference judge, the answer-string judge, the VLM rubric,
the labelling page and stage 03's blind sheet all use these words and these grades):
  sufficient  (grade 2) — a competent reader derives the answer from this unit (or this evidence
              set) alone.
  supporting  (grade 1) — on the question's subject but insufficient alone: the asked metric for
              the asked entity in another period or revision, or part of a multi-page
              question's evidence.
  irrelevant  (grade 0) — otherwise.
"""

from __future__ import annotations

LABELS = ("sufficient", "supporting", "irrelevant")
# the k the hard columns report: a question is in them only when its candidate set is larger than the largest
HARD_KS = (1, 3, 5)
# Graded relevance of each three-way label: nDCG gains and relevance thresholds follow from these.
LABEL_GRADES: dict[str, int] = {"sufficient": 2, "supporting": 1, "irrelevant": 0}
GRADE_LABELS: dict[int, str] = {g: label for label, g in LABEL_GRADES.items()}
LABEL_MEANINGS: dict[str, str] = {
    "sufficient": "a competent reader derives the answer from this page (or this evidence set) alone",
    "supporting": ("on the question's subject but insufficient alone: the asked figure for the asked entity "
                   "in another period or revision, or part of the evidence of a question that needs several pages"),
    "irrelevant": "otherwise",
}
# The same labels for descriptive queries over photos (what is shown, not what is stated).
PHOTO_LABEL_MEANINGS: dict[str, str] = {
    "sufficient": "relevant: the photo shows what the query describes — its subject and the details it asks for",
    "supporting": "partly: the photo shows the query's subject but misses or contradicts a detail it asks for",
    "irrelevant": "not: the photo does not show what the query describes",
}


def label_meanings(noun: str = "page") -> dict[str, str]:
    """The rubric people and judges label by: documents' for pages and slides, the photo rubric for photos
    and the images of an image folder."""
    return PHOTO_LABEL_MEANINGS if noun in ("photo", "image") else LABEL_MEANINGS


def unit_noun(source: str, content_types=()) -> str:
    """What every page, headline and rubric calls a unit: a photo when the metadata says every unit is
    one (content_type photo), an image in an image folder (photos, scans), a page otherwise."""
    types = {str(t) for t in content_types}
    if types == {"photo"}:
        return "photo"
    return "image" if source == "images" else "page"


# Question registers: what is shown ("revenue by segment"), its style ("a bar chart of ..."), or
# a question a person would ask.
REGISTERS = ("shown", "style", "question")
EVIDENCE_STRUCTURES = ("page-single", "page-multi", "doc-adjacent", "doc-near", "doc-far", "cross-doc")
CONTENT_TYPES = ("chart", "table", "text", "graphic", "photo", "other")
# Metric ids of the demo's metadata in the words a reader uses.
METRIC_LABELS = {"revenue": "revenue", "operating_income": "operating income", "capex": "capital expenditure",
                 "headcount": "headcount", "kpi_summary": "key figures"}


def money(value: float) -> str:
    """A demo money figure as printed on its pages: $1,234M."""
    return f"${value:,.0f}M"
