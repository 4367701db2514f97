"""lookalike: an honest evaluation workbench for visual retrievers."""

__version__ = "0.1.0"
