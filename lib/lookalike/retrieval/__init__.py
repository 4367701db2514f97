"""Encoders, indexes, derived systems (fusion, document context, reranking, splitting) and their runs."""
