"""Sampling: the sampler interface, the transformers and vLLM backends, model resolution and the tiny test model."""
