"""Sweeps: grids of simulated runs for the paper's three questions, run into a resumable store.

A sweep is two things:

1. A **plan** (:class:`SweepPlan`): plain data naming every run. It stores the shared settings
   (the base config, as a dict) and the grid of cells ``(n, b_p, budget)`` times seeds;
   :meth:`SweepPlan.configs` turns it into :class:`~isosim.sim.config.SimConfig` objects. Builders:

   - :func:`plan_q1` (Q1, fixed ``B_p``, vary ``n``, every run to the budget: ``M = C / (B_p n)``),
   - :func:`plan_q2` (Q2, fixed rollout batch ``B = B_p n``, vary the split ``B_p = B / n``;
     ``M`` varies along each run: every evaluation row is one ``M``),
   - :func:`plan_q3` (Q3, ``n`` and ``B_p`` both free),
   - :func:`plan_for_preset` (any of the three from a named preset, full or ``quick``).

   Cells that cannot run (``B_p`` above the training set, a budget below one step, ``B_p * n``
   above the hardware cap ``b_max``, any other invalid config) are dropped and listed in
   ``plan.dropped``; a plan with no cell left raises :class:`~isosim.errors.IsosimError`.

2. A **store** (:func:`run_sweep`, :func:`load_store`): a folder that fills up chunk by chunk::

       out_dir/
         plan.json                    the plan (SweepPlan.to_json), written once
         manifest.json                {"format", "plan_id", "chunks": [{"file", "run_ids",
                                       "rows", "device", "seconds"}]}: the only list of
                                       finished work
         records/chunk-00000.parquet  records of the runs of one chunk (isosim.records columns)
         records/chunk-00001.parquet
         .lock                        held (flock) while a process runs the sweep

   Every file is written to a temporary name, fsynced, renamed over its final name with
   ``os.replace`` and the folder fsynced, so a reader sees either the old file or the new one.
   A chunk counts as finished only once ``manifest.json`` lists it. Killing the sweep at any
   moment and rerunning the same command resumes: runs listed in the manifest are not rerun;
   a leftover temporary file, or a chunk file the manifest does not list (a kill between the
   chunk's rename and the manifest's), is deleted and its runs are simulated again (the engine is
   deterministic, so redoing is always safe).

``n`` / ``B_p`` / ``M`` follow PAPER.md: ``C = B_p * n * M`` rollouts.

The plans live in :mod:`isosim.sweeps.plans`, the store in :mod:`isosim.sweeps.store`; this module names both.
"""

from isosim.sweeps.plans import (
    B_MAX_EASY,
    B_MAX_HARD,
    FULL_B_P,
    FULL_BUDGET,
    FULL_N,
    FULL_Q1_B_P,
    FULL_Q2_BATCH,
    GRID_FIELDS,
    PLAN_FORMAT,
    QUESTIONS,
    QUICK,
    Cell,
    SweepPlan,
    plan_for_preset,
    plan_q1,
    plan_q2,
    plan_q3,
    powers_of_two,
    run_rollouts,
)
from isosim.sweeps.store import (
    CHUNK_MAX_RUN_STEPS,
    CHUNK_MAX_RUNS,
    STORE_FORMAT,
    SimulateFn,
    hold,
    load_store,
    plan_chunks,
    run_sweep,
    store_status,
)

__all__ = [
    "B_MAX_EASY", "B_MAX_HARD", "CHUNK_MAX_RUNS", "CHUNK_MAX_RUN_STEPS", "FULL_BUDGET", "FULL_B_P", "FULL_N",
    "FULL_Q1_B_P", "FULL_Q2_BATCH", "GRID_FIELDS", "PLAN_FORMAT", "QUESTIONS", "QUICK", "STORE_FORMAT", "Cell",
    "SimulateFn", "SweepPlan", "load_store", "plan_chunks", "plan_for_preset", "plan_q1", "plan_q2", "plan_q3",
    "hold", "powers_of_two", "run_rollouts", "run_sweep", "store_status",
]
