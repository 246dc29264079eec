"""``python -m llm_runs`` is ``python -m llm_runs.training.train``."""

import sys

from llm_runs.training.train import main

sys.exit(main())
