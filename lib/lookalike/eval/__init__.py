"""The exact evaluator: TREC files, measures in every dialect, paired comparisons and their intervals."""
