"""pytest configuration shared by unit tests and nbval notebook runs (which collect outputs/ci/notebooks)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_collectstart(collector):
    # nbval compares only cells marked NBVAL_CHECK_OUTPUT (--nbval-lax); of those, compare the
    # plain-text numbers, never HTML reprs, images, SVG or stderr.
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html", "image/png", "image/jpeg", "image/svg+xml",
                                   "application/javascript", "stderr")
