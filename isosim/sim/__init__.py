"""The simulator: difficulty profiles and presets, run settings, problem populations, the GRPO engine and its gymnasium environment."""
