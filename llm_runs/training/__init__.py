"""Training: the GRPO trainer, its optimizer steps, evaluation points, metrics, processes and run folder."""
