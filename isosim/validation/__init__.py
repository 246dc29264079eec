"""Validation: the plan and analysis of real runs at n below, at and above the predicted n_sat, and the verdict."""
