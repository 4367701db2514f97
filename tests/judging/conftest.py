"""Fixtures the judging tests share: a one-colour page image, and the ci configuration's demo corpus
(the session's, from tests/conftest.py)."""

import pytest
from PIL import Image


@pytest.fixture
def page(tmp_path):
    path = tmp_path / "page.png"
    Image.new("RGB", (40, 20), (10, 120, 200)).save(path)
    return {"unit_id": "u1", "image_path": str(path)}


@pytest.fixture(scope="session")
def ci_demo(ci_corpus):
    return ci_corpus[0]
