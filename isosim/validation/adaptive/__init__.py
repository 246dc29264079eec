"""Adaptive choice of ``n`` for one budget: run a few ``n``, stop the dominated ones, extend the
winner to the budget. Pure decision logic, fed by evaluation records as they arrive; the same
code drives live runs (``isosim validate --adaptive``) and the replay over committed records.

The rules (chosen from the shape of isocompute curves, not fitted to any sweep; scored on all
committed sweeps at once, studies/LOG.md):

* **Rungs.** Decisions are taken when every active run has reached a rung: ``C / 32``, ``C / 16``,
  ``C / 8``, ``C / 4``, ``C / 2`` rollouts (``first_rung`` and ``eta``; a rung costs a stopped run
  half as much as the next, and most stops happen at the first). A run "reaches" a rung at its
  last evaluation at or below it (see :func:`reveal`), so a run is always paused on an evaluation
  (no extra evaluations, and the paused run continues exactly: the lr schedule is constant after
  warm-up and the evaluation steps are placed over the full budget ``C`` from the start).
* **Start.** The ``start`` list (the prediction's ``n`` and its neighbours two octaves away, or
  a spread over the grid when there is no prediction).
* **Level and slope.** Each run's curve is read locally: a least-squares line in ``ln rollouts``
  through its evaluations within one octave below its last one (at least two points; a wider
  window carries a run's rise into its level past a peak), giving the level at the rung and the
  slope per unit of ``ln rollouts``.
* **Noise.** One seed per ``n``, so seed noise is not measured directly. ``sigma`` is the larger
  of (a) the evaluation's sampling error ``sqrt(v (1 - v) / (V N))`` (V validation problems, N
  samples each; an upper bound for a mean of per-problem rates) and (b) the curves' roughness:
  the robust spread of each evaluation around the straight line through its two neighbours
  (last four evaluations of every run, scaled for the interpolation weights). Both are logged.
* **Peak.** A run whose level has fallen below its own best evaluation by more than ``z``
  standard deviations of that difference, with a negative slope, has peaked (with few training
  problems a run overfits, and a smaller ``n``, taking more steps for the same rollouts, peaks
  earlier). Its value at ``C`` is below its level now, so it is carried down its falling line to
  ``C`` (its "base"); any other run's base is its level. A peaked run that does not lead stops;
  once a run has peaked, the next larger untried ``n`` starts (when the largest ``n`` running has
  not peaked) and no smaller one is started.
* **Stop.** The leader is the run with the best base. A run stops when even its optimistic
  projection to ``C`` -- its base plus the excess of its slope over the leader's (if any, and
  not for a peaked run) times the ``ln`` rollouts left -- is below the leader's base minus
  ``z * sigma * sqrt(2)`` (``z = 2``). Curves are concave in ``ln rollouts`` past their take-off,
  so the straight-line projection overstates what a rising run can still gain, and the leader's
  own future gain is ignored: both err towards keeping a run.
* **New n.** When the leader is the smallest ``n`` running and no smaller grid ``n`` was tried,
  the next smaller grid ``n`` starts; when the largest ``n`` running leads, or its projection
  overtakes the leader's, the next larger one starts. A new run first catches up to the current
  rung, then the rung is decided again. At most one new ``n`` starts per rung
  (``spawns_per_rung``), so one noisy rung cannot start every larger ``n`` in turn.
* **Choice and extension.** When one run is left it is extended to ``C``. At the last rung
  (``C / 2``) the run with the best base is chosen, unless another's projection to ``C`` beats
  the leader's by more than ``z`` times its sd. The chosen run continues to ``C``.
* **Log.** Every decision is a JSON-ready dict (``event``: start, rung, stop, spawn, advance,
  choose, done); :class:`Adaptive` rebuilt from the list continues where it stopped.

Known weakness (tests mark it): the ``C / 32`` rung decides before a larger ``n`` has taken off,
so a late riser that trails there by more than the noise (fewer steps at the same rollouts) is
stopped, and a start below the answer may never go up. On a sweep like organism_f8/hard-128
these rules do not find the late riser (studies/LOG.md).

The other rule, ``policy="lines"`` (:func:`lines_settings`, ``--search lines``): every grid ``n``
runs to ``C / 4``; the two whose local lines carried to ``C`` are best continue to ``C / 2``; the
better evaluation there is chosen. It equals the reference reader of that name (:data:`REFERENCES`)
and costs about 1.2 runs; of the rules scored it is the only one whose mean regret stays under
twice the mean seed noise on every committed sweep, organism_f8/hard-128 (runs peak early, larger
n later) included.

The third rule, ``policy="sbi"`` (:func:`sbi_settings`, ``--search sbi``,
:mod:`~isosim.validation.adaptive.sbi_search`): successive halving at C / 32, C / 16, C / 8, C / 4
(:data:`SBI_RUNGS`) whose ranking is the simulation-trained reader's prediction of each surviving
n's regret at C (:mod:`isosim.predict.sbi`, read as the frozen ``sbi-band`` method reads), taken
before anything stops; the last n left, or the best predicted at C / 4, continues to C.

Overhead is the rollouts spent on runs that were not chosen, divided by ``C`` (the chosen run is
the user's training run). :func:`successive_halving` is the blind baseline; the replay runs it on
its own rungs (``C / 16`` up, :data:`SH_FIRST_RUNG`) and, as an extra column, on the adaptive
policy's (:data:`SH_CHEAP`).

The modules, by concern: :mod:`~isosim.validation.adaptive.rules` (the settings),
:mod:`~isosim.validation.adaptive.curves` (reading a run's curve),
:mod:`~isosim.validation.adaptive.search` (the search's state, decisions and log, live or
replayed), :mod:`~isosim.validation.adaptive.replay` (replays over complete records and the
reference readers), :mod:`~isosim.validation.adaptive.sbi_search` (the "sbi" rule's rungs),
:mod:`~isosim.validation.adaptive.scoring` (scoring them on a committed sweep).
Every public name is importable from this package.
"""

from isosim.validation.adaptive.rules import FIRST_ROUND_RULES, SBI_RUNGS, Settings, lines_settings, sbi_settings, spread_start
from isosim.validation.adaptive.curves import (REACH_RTOL, Curve, accelerating, local_fit, noise, past_takeoff,
                                               reveal, roughness, spent, value_at, value_at_steps)
from isosim.validation.adaptive.search import BOUNDARY, Adaptive, plot_search
from isosim.validation.adaptive.replay import REFERENCES, informed_choice, replay, successive_halving
from isosim.validation.adaptive.scoring import (MIN_STEPS, SH_CHEAP, SH_FIRST_RUNG, default_budgets, grid_at, seed_replays,
                                                load_sweep, score_references, score_sweep, truth_at)

__all__ = [
    "BOUNDARY", "FIRST_ROUND_RULES", "SBI_RUNGS", "MIN_STEPS", "REACH_RTOL", "REFERENCES", "SH_CHEAP", "SH_FIRST_RUNG",
    "Adaptive", "Curve", "Settings", "accelerating", "default_budgets", "grid_at", "informed_choice",
    "lines_settings", "load_sweep", "local_fit", "noise", "past_takeoff", "plot_search", "replay", "reveal",
    "roughness", "sbi_settings", "score_references", "score_sweep", "seed_replays", "spent", "spread_start", "successive_halving", "truth_at",
    "value_at", "value_at_steps",
]
