"""``python -m llm_runs.organism``: build the model organism (see :mod:`llm_runs.organism.build`)."""

from llm_runs.organism.build import main

if __name__ == "__main__":
    raise SystemExit(main())
