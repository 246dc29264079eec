"""Problems: problem sets (JSON Lines / HF), prompts, train/val splits, rewards and the arithmetic generator."""
