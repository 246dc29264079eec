"""Sweeps: isocompute plans of simulated runs and the resumable store that runs them."""
