"""Stage 01, the corpus stratified (stages.stratify_corpus): its sections on their edge cases and the stage on the ci configuration."""

from __future__ import annotations

import numpy as np
import pandas as pd
from tests.stages.recording import (call, recorded_input)
import pytest


def test_sample_takes_at_most_per_stratum_units_of_each_content_type(recorded):
    sec, sample = call(recorded, "stratify_corpus", "sample_section", per_stratum=1, rng=np.random.default_rng(0))
    units = recorded_input(recorded, "stratify_corpus", "sample_section", "units")
    assert len(sample) == units["content_type"].nunique() and sample["content_type"].is_unique
    assert sec.tables["sample"]["unit_id"].is_monotonic_increasing


def test_questions_section_says_when_there_are_none(recorded):
    sec, = call(recorded, "stratify_corpus", "questions_section", questions=pd.DataFrame())
    assert sec.text["questions"].strip() == "no questions supplied with this corpus"


def test_stratify_headline_without_templates_says_strata_are_by_content_type(recorded):
    strata = recorded_input(recorded, "stratify_corpus", "headline_section", "strata")
    sec, = call(recorded, "stratify_corpus", "headline_section", strata=strata.assign(template_id=""))
    assert "no template metadata: strata are by content type only" in sec.sentence
    assert sec.numbers["units"] == len(recorded_input(recorded, "stratify_corpus", "headline_section", "units"))


@pytest.mark.slow
def test_stratify_keeps_every_demo_unit_and_samples_each_stratum(results):
    _, out = results
    units, sample = out["stratify_corpus"].tables["units"], out["stratify_corpus"].tables["sample"]
    assert len(units) == units["unit_id"].nunique() > 100
    assert set(sample["content_type"]) == set(units["content_type"])
