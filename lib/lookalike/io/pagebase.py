"""Page numbers in the files people bring: which base they count from, checked, never guessed.

Corpus unit ids are ``doc:page`` with pages counted from 1. A file a user brings (qrels, a run,
blind queries, a regression report, human labels) may count from 0; ``corpus.page_base`` says
which, and ids are shifted to the corpus's base by ``normalise``. ``check`` refuses a file whose
ids contradict the declared base, instead of letting rows slide one page off or into skipped.csv:

  declared 1, and an id names page 0 of a corpus document: page 0 exists only when counting from 0;
  declared 0, and an id names page N of an N-page document: page N exists only when counting from 1.

One such id is enough: a file in the declared base can never hold it. The error gives the counts,
example rows and the base the file evidently uses. Page counts are those of the corpus as read
(``pages`` / ``max_pages`` limits included), so under base 0 a file that names pages beyond a
limited corpus is refused too — the message says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from lookalike.data.schema import CorpusError

_PAGE = re.compile(r"^(?P<doc>.+):(?P<page>\d+)$")


class PageBaseError(CorpusError):
    """A file's page numbers contradict the declared page base."""


def split(unit_id: str) -> tuple[str, int] | None:
    """('doc', page) for a 'doc:page' id, else None."""
    m = _PAGE.match(str(unit_id).strip())
    return (m.group("doc"), int(m.group("page"))) if m else None


def shift(unit_id: str, by: int) -> str:
    """The unit id with its page number moved by ``by`` (another page base); an id that is not doc:page is returned
    as is."""
    parts = split(unit_id)
    return f"{parts[0]}:{parts[1] + by}" if parts else unit_id


def page_counts(unit_ids: Iterable[str]) -> dict[str, int]:
    """Pages per document of the corpus (its highest 1-based page)."""
    counts: dict[str, int] = {}
    for u in unit_ids:
        parts = split(u)
        if parts:
            counts[parts[0]] = max(counts.get(parts[0], 0), parts[1])
    return counts


def normalise(unit_ids: Iterable[str], page_base: int) -> list[str]:
    """The ids in the corpus's base (pages from 1)."""
    return [shift(u, 1) for u in unit_ids] if page_base == 0 else [str(u).strip() for u in unit_ids]


def check(source: str, unit_ids: Sequence[str], page_base: int, corpus_unit_ids: Iterable[str],
          rows: Sequence[int] | None = None, what: str = "page ids", examples: int = 3) -> None:
    """Refuse (PageBaseError) a file whose ids, as written, contradict page_base. rows: the file's
    row or line number of each id (default: 1, 2, ...)."""
    if page_base not in (0, 1):
        raise PageBaseError(f"{source}: page_base must be 0 or 1, got {page_base!r}")
    counts = page_counts(corpus_unit_ids)
    rows = list(rows) if rows is not None else list(range(1, len(unit_ids) + 1))
    bad = []
    for row, uid in zip(rows, unit_ids):
        parts = split(uid)
        if not parts or parts[0] not in counts:
            continue
        doc, page = parts
        if (page_base == 1 and page == 0) or (page_base == 0 and page == counts[doc]):
            bad.append((row, str(uid).strip(), counts[doc]))
    if not bad:
        return
    shown = ", ".join(f"row {r} {u!r}" for r, u, _ in bad[:examples])
    n, total = len(bad), len(unit_ids)
    if page_base == 1:
        raise PageBaseError(
            f"{source}: {n} of {total} {what} name page 0 ({shown}{', ...' if n > examples else ''}), which does not "
            f"exist when pages are counted from 1 — the page base is wrong: the file evidently counts pages from 0. Declare corpus.page_base: 0 "
            f"(nothing was read: under page_base 1 these rows would be dropped and every other row would point one page "
            f"off).")
    r, u, count = bad[0]
    raise PageBaseError(
        f"{source}: {n} of {total} {what} name the last page of their document counted from 1 ({shown}"
        f"{', ...' if n > examples else ''}; {u!r} is page {count} of a {count}-page document as read), which exists "
        f"only when pages are counted from 1 — the page base is wrong: the file evidently counts pages from 1. Declare corpus.page_base: 1 "
        f"(or, if the corpus was limited with pages / max_pages, these rows lie beyond the pages read).")


def evidence(unit_ids: Sequence[str], corpus_unit_ids: Iterable[str]) -> str:
    """What a file's ids say about its page base, in words: how many name page 0 (valid only
    counting from 0) and how many name a document's last page (valid only counting from 1)."""
    counts = page_counts(corpus_unit_ids)
    paged = [p for p in (split(u) for u in unit_ids) if p and p[0] in counts]
    zero = sum(page == 0 for _, page in paged)
    last = sum(page == counts[doc] for doc, page in paged)
    if not paged:
        return "no doc:page ids of corpus documents"
    verdict = ("consistent with either base" if not zero and not last else
               "counts from 0" if zero and not last else "counts from 1" if last and not zero else
               "mixes both bases")
    return f"{len(paged)} doc:page ids; {zero} on page 0, {last} on a document's last page: {verdict}"
