"""The frontier analysis: records to points, per-n fits, the envelope and n*(C), ties, side analyses, figures and the report."""
