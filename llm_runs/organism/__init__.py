"""The model organism: a tiny Llama built here, its simulator prediction and the comparison with its real sweeps."""
