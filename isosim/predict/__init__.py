"""Prediction: the recommendation for a budget, the simulator's dynamics fitted to real runs, and the fidelity harness."""
