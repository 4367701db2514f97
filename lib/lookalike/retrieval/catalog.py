"""The systems a run builds from its encoded ones, declared once: what each fuses or rescores, and
when it can be built. Every stage and ``lookalike check`` ask ``plan`` instead of naming systems,
so a system is built in all of them or in none, and one that cannot be built says why.

  pixels-rrf              reciprocal rank fusion of ocr-minilm and ocr-bm25 (both read pixels)
  hybrid-rrf              reciprocal rank fusion of every encoded system, when they include one that
                          reads pixels and one that reads captions (a hybrid of the two)
  ocr-minilm+doc-context  ocr-minilm's page score plus the question's match to the page's document
                          context (VL-DocIR's document-context scoring)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lookalike.registry import Registry


@dataclass(frozen=True)
class SystemSpec:
    """A derived system: how it is built (rrf fusion or document-context rescoring), from which encoded systems,
    what their provenance must include, and the first stage that ranks with it."""
    name: str
    how: str                         # rrf (fusion of the members' runs) | doc-context (rescoring a member)
    members: tuple[str, ...] = ()    # the encoded systems it is built from; () = every encoded system
    needs: tuple[str, ...] = ()      # provenances the members must include (hybrid: pixels and caption-text)
    first_stage: str = "02"          # the first stage that ranks with it
    context_vectors: int = 0         # doc-context: context vectors per document (k-means centroids)

    def plan(self, base: Sequence[str], provenance: Mapping[str, str]) -> tuple[list[str] | None, str]:
        """(the members to build it from, '') or (None, why it is not built on this run)."""
        members = list(self.members) if self.members else list(base)
        missing = [m for m in members if m not in base]
        if missing:
            return None, f"{self.name} not built: it needs {' and '.join(missing)}, which this run did not encode"
        have = {provenance.get(m, "pixels") for m in members}
        lacking = [p for p in self.needs if p not in have]
        if lacking:
            return None, (f"{self.name} not built: it fuses systems reading {' and '.join(self.needs)}, and this "
                          f"run's encoded systems ({', '.join(members) or 'none'}) read no {' or '.join(lacking)}")
        if self.how == "rrf" and len(members) < 2:
            return None, f"{self.name} not built: a fusion needs two systems, this run has {', '.join(members)}"
        return members, ""


PIXELS_RRF, HYBRID_RRF, DOC_CONTEXT = "pixels-rrf", "hybrid-rrf", "ocr-minilm+doc-context"
SYSTEMS: Registry[SystemSpec] = Registry("derived system")
SYSTEMS.register(SystemSpec(PIXELS_RRF, "rrf", ("ocr-minilm", "ocr-bm25")))
SYSTEMS.register(SystemSpec(HYBRID_RRF, "rrf", (), ("pixels", "caption-text"), first_stage="06"))
SYSTEMS.register(SystemSpec(DOC_CONTEXT, "doc-context", ("ocr-minilm",), first_stage="06", context_vectors=4))


def provenance(name: str, members: Sequence[str], of: Mapping[str, str]) -> str:
    """What a derived system reads: its members' provenance when they share one, else theirs joined
    with '+' (a hybrid reads both)."""
    kinds = sorted({of.get(m, "pixels") for m in members})
    return kinds[0] if len(kinds) == 1 else "+".join(kinds)


@dataclass
class Plan:
    """Which derived systems a stage builds (name -> members) and why each other one is not built."""
    built: dict[str, list[str]]      # name -> members, in registry order
    not_built: dict[str, str]        # name -> why not

    def fusions(self) -> dict[str, list[str]]:
        """The fusion systems built (name -> the members they fuse)."""
        return {n: m for n, m in self.built.items() if SYSTEMS[n].how == "rrf"}

    def rescorings(self) -> dict[str, list[str]]:
        """The doc-context systems built (name -> the member whose pages they rescore)."""
        return {n: m for n, m in self.built.items() if SYSTEMS[n].how == "doc-context"}

    def has(self, name: str) -> bool:
        """Whether the system named was built."""
        return name in self.built


def own_documents(doc_ids: Sequence[str]) -> bool:
    """Whether every unit is its own document (photos, single-page files): a document's context is then the
    unit itself, and a document-context system ranks exactly as its member does."""
    ids = list(doc_ids)
    return bool(ids) and len(set(ids)) == len(ids)


def plan(base: Sequence[str], provenance: Mapping[str, str], stage: str = "07", doc_ids: Sequence[str] = ()) -> Plan:
    """Which derived systems a stage builds from these encoded systems (base, in encode.encoders
    order; provenance: name -> what it reads), and why each other one is not built. doc_ids: the units'
    documents; where every unit is its own (own_documents), no document-context system is built."""
    built, not_built = {}, {}
    alone = own_documents(doc_ids)
    for spec in SYSTEMS.values():
        if spec.first_stage > stage[:2]:
            continue
        if spec.how == "doc-context" and alone:
            not_built[spec.name] = (f"{spec.name} not built: every unit is its own document, so a document's "
                                    f"context is the unit itself and it would rank exactly as "
                                    f"{' and '.join(spec.members)} does")
            continue
        members, why = spec.plan(base, provenance)
        if members is None:
            not_built[spec.name] = why
        else:
            built[spec.name] = members
    return Plan(built, not_built)
