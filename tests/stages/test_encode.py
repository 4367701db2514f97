"""Stage 02, encoding (stages.encode): the device said as resolved, the appearance check where it applies."""

from __future__ import annotations

from tests.stages.recording import (MODULES, call, recorded_input)


def test_device_section_says_the_device_it_resolved():
    sec, = MODULES["encode"].device_section("cpu")
    assert sec.text["device"].startswith("device: cpu (")


def test_appearance_check_without_templates_says_it_does_not_apply(recorded):
    units = recorded_input(recorded, "encode", "appearance_section", "units")
    sec, = call(recorded, "encode", "appearance_section", units=units.assign(template_id=""))
    assert sec.text["appearance"].strip() == "no template metadata: the nearest-neighbour template check does not apply"
    sec, = call(recorded, "encode", "appearance_section")
    assert "nearest neighbour shares the template" in sec.text["appearance"]
