"""Shared test fixtures."""

import json

import pytest


@pytest.fixture(scope="module")
def tiny_assets(tmp_path_factory):
    """A factory: ``tiny_assets(name, n_problems)`` writes a tiny random Llama and a JSONL file of
    seeded two-term sums under a fresh folder; returns model, data and folder paths."""

    def make(name: str, n_problems: int) -> dict:
        from llm_runs.problems.make_arith import make_problems
        from llm_runs.sampling.tiny import make_tiny_model

        root = tmp_path_factory.mktemp(name)
        model = make_tiny_model(root / "tiny", seed=0)
        data = root / "arith.jsonl"
        data.write_text("".join(json.dumps(p) + "\n" for p in make_problems(n_problems, seed=0)))
        return {"model": str(model), "data": str(data), "root": root}

    return make
