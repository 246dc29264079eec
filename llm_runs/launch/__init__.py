"""Launching: isosim validate's plan and launchers (local, SLURM) and the measured difficulty profiles (isosim calibrate)."""
