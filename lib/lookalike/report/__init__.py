"""The run folder and what a reader opens: tables, pages from templates, charts, claims and their audit."""
