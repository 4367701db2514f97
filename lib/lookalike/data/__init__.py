"""The corpus schema, the built-in demo corpus and the example corpora the docs and tests build."""
