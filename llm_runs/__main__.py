"""``python -m llm_runs`` is ``python -m llm_runs.train``."""

import sys

from llm_runs.train import main

sys.exit(main())
