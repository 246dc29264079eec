"""The cheap isocompute sweep in a trainer's own settings: TRL, verl or isosim's runner.

``isosim plan`` writes, for a budget C in rollouts, one run per n of a grid, all at one B_p, each
for a small share of C (the cheap part that ``isosim recommend --runs`` reads). A run with
``n`` completions per prompt and ``B_p`` prompts per step spends ``B_p * n`` rollouts per
optimizer step, so the cheap part's ``share * C`` rollouts give ``M = floor(share * C / (B_p n))``
steps. Here those three numbers become each trainer's settings, checked against the trainer's
own rules; a setting no rule allows is refused with one line naming the rule and the nearest
valid settings (:class:`isosim.errors.IsosimError`).

The rules, as the trainers' sources state them (the versions read are named):

* **TRL** 1.16 (``trl/trainer/grpo_config.py``, ``GRPOConfig.__post_init__``): with
  ``steps_per_generation`` set and ``generation_batch_size`` left unset, the generation batch is
  ``per_device_train_batch_size * processes * steps_per_generation`` completions; it "must be
  divisible by num_generations" and ``num_generations`` must be at least 2. ``GRPOTrainer``
  (``trl/trainer/grpo_trainer.py``) generates once every ``steps_per_generation * num_iterations``
  micro-batches and steps the optimizer every ``gradient_accumulation_steps`` of them, so
  ``steps_per_generation = gradient_accumulation_steps`` and ``num_iterations = 1`` make one
  on-policy update per generation batch of ``B_p * n`` completions (a group may span micro-batches:
  the rewards are gathered over the whole generation batch before they are grouped).
  ``per_device_train_batch_size`` counts completions, not prompts.
* **verl** 0.9.1 (``verl/utils/config.py``, ``validate_config``; ``verl/workers/config/actor.py``;
  ``verl/trainer/ppo/ray_trainer.py``): ``data.train_batch_size`` and
  ``actor_rollout_ref.actor.ppo_mini_batch_size`` count prompts (the trainer multiplies the
  mini-batch by ``rollout.n``); ``train_batch_size * rollout.n`` must be divisible by the GPUs
  (``n_gpus_per_node * nnodes``); ``train_batch_size >= ppo_mini_batch_size``; each GPU's share of a
  mini-batch must split into micro-batches of ``ppo_micro_batch_size_per_gpu``
  (``verl/workers/engine/utils.py``). ``ppo_mini_batch_size = train_batch_size`` with
  ``ppo_epochs = 1`` makes one update per batch.
* **isosim** (``llm_runs.training.train``): ``b_p`` must be a multiple of the processes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from isosim.errors import IsosimError
from isosim.integrations.lr import LR_REF_BATCH, RULES as LR_RULES, lr_for

TRAINERS = ("trl", "verl", "isosim")
DEFAULT_SHARE = 0.05
"""the cheap part's share of C: the plane's replays read every n at 5 % of C (studies/LOG.md)"""
DEFAULT_B_P = 32
DEFAULT_PER_DEVICE = 8
"""completions per device per micro-batch when none is given (TRL's per_device_train_batch_size default)"""
MIN_STEPS = 10
N_MAX = 256
MAX_SEEDS = 1_000
"""the most runs per n a plan writes (a cheap sweep has one to three)"""
MAX_LR = 1e-2
"""the largest BASE lr plan writes: 33 times the organism's 3e-4 and 10,000 times TRL's default 1e-6;
AdamW fine-tuning of a language model above it diverges (a larger --lr is a typo or another unit)"""
VERL_VERSION = "0.9.1"
TRL_VERSION = "1.16.0"


@dataclass(frozen=True)
class Hardware:
    """Where the runs train: ``processes`` training processes (GPUs) over ``nodes`` nodes, and the
    most completions one device holds in a micro-batch (``per_device``)."""

    processes: int = 1
    nodes: int = 1
    per_device: int = DEFAULT_PER_DEVICE

    def check(self) -> None:
        if self.processes < 1:
            raise IsosimError(f"--processes must be >= 1 (training processes, one per GPU), got {self.processes}")
        if self.nodes < 1 or self.processes % self.nodes:
            raise IsosimError(f"--processes {self.processes} must split evenly over --nodes {self.nodes} "
                              f"(e.g. --nodes 1)")
        if self.per_device < 1:
            raise IsosimError(f"--max-per-device must be >= 1 completion, got {self.per_device}")


@dataclass
class Run:
    """One run of the sweep in isosim's terms and in its trainer's."""

    name: str
    n: int
    b_p: int
    steps: int
    seed: int
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lr: float | None = None
    """the run's learning rate (None: the trainer's default)"""
    lr_rule: str | None = None
    """the rule that gave ``lr`` from ``base_lr`` (:mod:`isosim.integrations.lr`)"""
    base_lr: float | None = None
    """the lr at the reference batch ``lr_ref_batch``"""
    lr_ref_batch: float | None = None
    """the rollouts a step at which ``base_lr`` was set (1024, or B_p x the n the user tuned it at)"""

    @property
    def rollouts(self) -> int:
        return self.steps * self.b_p * self.n


def run_name(n: int, seed: int, stage: str = "") -> str:
    return f"n{n}{stage}-s{seed}"


def check_budget(budget: float | None, share: float) -> None:
    from isosim.sim.config import MAX_BUDGET

    if budget is None or math.isnan(budget) or budget <= 0:
        raise IsosimError(f"--budget must be a positive number of rollouts, got {budget}")
    if math.isinf(budget):
        raise IsosimError("--budget must be finite: a number of rollouts, e.g. 2e6 (got inf)")
    if budget > MAX_BUDGET:
        raise IsosimError(f"--budget {budget:.3g} rollouts is beyond any plausible run (at most {MAX_BUDGET:.0e}, "
                          "as recommend: 30 years at 10,000 rollouts a second); is it in rollouts (not tokens)?")
    if not 0 < share < 1:
        raise IsosimError(f"--share must be between 0 and 1 (the cheap part's share of C), got {share}")


def check_lr(base: float | None, rule: str) -> None:
    """Refuse an lr BASE that is not a positive finite number, or a rule plan does not write."""
    if rule not in LR_RULES:
        raise IsosimError(f"--lr-rule must be {' or '.join(LR_RULES)}, got {rule!r}")
    if base is not None and not (math.isfinite(base) and base > 0):
        raise IsosimError(f"--lr must be a positive finite learning rate, got {base}")
    if base is not None and base > MAX_LR:
        raise IsosimError(f"--lr {base:g} is not a plausible learning rate for RL fine-tuning (at most {MAX_LR:g}; "
                          f"TRL's default is 1e-6, the organism's 3e-4)")


def check_n(n: int) -> None:
    if n < 2:
        raise IsosimError(f"n = {n}: GRPO needs at least 2 completions per prompt to compare (TRL refuses "
                          "num_generations < 2); use n >= 2")
    if n > N_MAX:
        raise IsosimError(f"n = {n}: plan covers n up to {N_MAX}")


def _b_p_step(n: int, processes: int) -> int:
    """The smallest B_p step for which ``B_p * n`` completions split evenly over the processes."""
    return processes // math.gcd(processes, n)


def b_p_multiple(trainer: str, ns: list[int], processes: int) -> int:
    """B_p must be a multiple of this for every n of the grid (the trainer's split rule)."""
    if trainer == "isosim":
        return processes
    return math.lcm(*(_b_p_step(n, processes) for n in ns))


def _nearest_multiples(value: int, step: int) -> list[int]:
    lo = (value // step) * step
    return sorted({m for m in (lo, lo + step) if m >= step})


def _nearest_n(n: int, b_p: int, processes: int, trainer: str) -> list[int]:
    if trainer == "isosim":
        return []
    ok = [m for m in range(2, 2 * N_MAX + 1) if (b_p * m) % processes == 0]
    best = sorted(ok, key=lambda m: (abs(m - n), m))[:2]
    return sorted(best)


def split_rule(trainer: str, processes: int) -> str:
    if trainer == "trl":
        return (f"TRL: the generation batch B_p x n must be divisible by per_device_train_batch_size x "
                f"{processes} processes")
    if trainer == "verl":
        return f"verl: data.train_batch_size x rollout.n must be divisible by the {processes} GPUs"
    return f"isosim: B_p must be a multiple of the {processes} processes"


def check_split(trainer: str, n: int, b_p: int, processes: int) -> None:
    """Refuse ``(n, B_p)`` whose completions do not split over the processes, naming the nearest
    valid B_p (and n)."""
    bad = (b_p % processes) if trainer == "isosim" else (b_p * n) % processes
    if not bad:
        return
    step = processes if trainer == "isosim" else _b_p_step(n, processes)
    b_ps = " or ".join(f"--b-p {m}" for m in _nearest_multiples(b_p, step))
    ns = _nearest_n(n, b_p, processes, trainer)
    alt = f"; or n = {' or '.join(map(str, ns))} at B_p = {b_p}" if ns else ""
    what = f"B_p = {b_p}" if trainer == "isosim" else f"B_p x n = {b_p} x {n} = {b_p * n} completions"
    raise IsosimError(f"n = {n}: {what} do not split over {processes} processes ({split_rule(trainer, processes)}); "
                      f"nearest valid: {b_ps}{alt}")


def largest_divisor(value: int, cap: int) -> int:
    """The largest divisor of ``value`` that is at most ``cap``."""
    best = 1
    for d in range(1, math.isqrt(value) + 1):
        if value % d == 0:
            for c in (d, value // d):
                if best < c <= cap:
                    best = c
    return best


def micro_batch(n: int, b_p: int, hw: Hardware) -> tuple[int, int]:
    """(completions per device per micro-batch, micro-batches per update) for one update of
    ``B_p * n`` completions over ``hw.processes`` devices, each holding at most ``hw.per_device``."""
    per_process = b_p * n // hw.processes
    per_device = largest_divisor(per_process, hw.per_device)
    return per_device, per_process // per_device


def steps_for(rollouts: float, n: int, b_p: int) -> int:
    return int(rollouts // (b_p * n))


def default_grid(cheap: float, b_p: int, min_steps: int = MIN_STEPS) -> list[int]:
    """Powers of two from 2 that give every run at least ``min_steps`` steps in the cheap part."""
    grid = [n for n in (2 ** k for k in range(1, 9)) if steps_for(cheap, n, b_p) >= min_steps]
    if not grid:
        raise IsosimError(f"the cheap part ({cheap:.3g} rollouts) gives even n = 2 at B_p = {b_p} fewer than "
                          f"{min_steps} steps; raise --budget or --share, or lower --b-p to at most "
                          f"{max(int(cheap // (2 * min_steps)), 1)}")
    return grid


def ceil_sig(x: float, digits: int = 3) -> float:
    """``x`` rounded up to ``digits`` significant digits (a hint that, followed, is enough)."""
    scale = 10 ** (digits - 1 - math.floor(math.log10(x)))
    return math.ceil(x * scale - 1e-9) / scale


def check_steps(n: int, b_p: int, cheap: float, min_steps: int, share: float, budget: float) -> int:
    steps = steps_for(cheap, n, b_p)
    if steps >= min_steps:
        return steps
    b_p_ok = int(cheap // (n * min_steps))
    share_ok = ceil_sig(min_steps * b_p * n / budget)
    hint = [f"--share {share_ok:g}" if share_ok < 1 else f"--budget {ceil_sig(min_steps * b_p * n / share):g}"]
    if b_p_ok >= 1:
        hint.append(f"--b-p {b_p_ok}")
    raise IsosimError(f"n = {n}: the cheap part ({share:.3g} of C = {cheap:.3g} rollouts) gives {steps} step(s) of "
                      f"B_p x n = {b_p * n} rollouts, fewer than --min-steps {min_steps}; nearest valid: "
                      f"{' or '.join(hint)}, or drop n = {n}")


def full_micro_batches(ns: list[int], b_p: int, hw: Hardware) -> bool:
    """True when every n's share of a process splits into micro-batches of at least half the
    per-device cap (or into one micro-batch where the share is smaller than the cap): no n is left
    with micro-batches of one or two completions because its share has no divisor near the cap."""
    for n in ns:
        per_process = b_p * n // hw.processes
        if largest_divisor(per_process, hw.per_device) < min(per_process, (hw.per_device + 1) // 2):
            return False
    return True


def resolve_b_p(trainer: str, ns: list[int], b_p: int | None, processes: int,
                per_device: int = DEFAULT_PER_DEVICE) -> tuple[int, list[str]]:
    """The sweep's one B_p: the one given (checked per n by :func:`check_split`), or the smallest
    multiple of the trainer's split step for the grid from the default on whose completions every
    n splits into full micro-batches (:func:`full_micro_batches`; at most twice the default, else
    the first multiple)."""
    if b_p is not None:
        if b_p < 1:
            raise IsosimError(f"--b-p must be >= 1 prompt per step, got {b_p}")
        return b_p, []
    step = b_p_multiple(trainer, ns, processes)
    first = -(-DEFAULT_B_P // step) * step
    hw = Hardware(processes=processes, per_device=per_device)
    chosen = first if trainer == "isosim" else next(
        (m for m in range(first, 2 * DEFAULT_B_P + 1, step) if full_micro_batches(ns, m, hw)), first)
    if chosen == DEFAULT_B_P:
        return chosen, []
    why = f"so that every n's completions split over {processes} processes"
    if chosen != first:
        why += (f" in micro-batches of at least {(per_device + 1) // 2} completions ({first} "
                f"would leave some n micro-batches of fewer)")
    return chosen, [f"B_p = {chosen}: the default {DEFAULT_B_P} rounded up to a multiple of {step}, {why}"]


# ----------------------------------------------------------------------------------------------
# Each trainer's settings for one run
# ----------------------------------------------------------------------------------------------
def trl_settings(run: Run, hw: Hardware, log_dir: str) -> dict[str, Any]:
    """``GRPOConfig`` arguments (TRL 1.16 names) for one on-policy update per generation batch, at one
    lr for the whole run (``lr_scheduler_type: constant``: TRL's default, linear decay to 0 over
    ``max_steps``, would anneal each cheap run over its own length, so a cheap run would not be the
    start of its full run and runs of different n would not be compared at their lr)."""
    per_device, accum = micro_batch(run.n, run.b_p, hw)
    return {
        "output_dir": log_dir, "run_name": run.name, "num_generations": run.n,
        "per_device_train_batch_size": per_device, "gradient_accumulation_steps": accum,
        "steps_per_generation": accum, "num_iterations": 1, "max_steps": run.steps, "seed": run.seed,
        "lr_scheduler_type": "constant",
        "logging_steps": 1, "report_to": ["tensorboard"], "save_strategy": "no",
        **({} if run.lr is None else {"learning_rate": run.lr}),
    }


def verl_settings(run: Run, hw: Hardware, log_dir: str) -> dict[str, Any]:
    """Hydra overrides for ``python -m verl.trainer.main_ppo`` (verl 0.9.1 keys), GRPO, one update a batch."""
    micro, _ = micro_batch(run.n, run.b_p, hw)
    return {
        "algorithm.adv_estimator": "grpo",
        "data.train_batch_size": run.b_p, "data.seed": run.seed,
        "actor_rollout_ref.rollout.n": run.n,
        "actor_rollout_ref.actor.ppo_mini_batch_size": run.b_p, "actor_rollout_ref.actor.ppo_epochs": 1,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
        "trainer.total_training_steps": run.steps, "trainer.total_epochs": run.steps,
        "trainer.test_freq": max(run.steps // 10, 1), "trainer.save_freq": -1,
        "trainer.n_gpus_per_node": hw.processes // hw.nodes, "trainer.nnodes": hw.nodes,
        "trainer.logger": ["console", "tensorboard"], "trainer.project_name": "isosim",
        "trainer.experiment_name": run.name, "trainer.default_local_dir": f"{log_dir}/checkpoints",
        **({} if run.lr is None else {"actor_rollout_ref.actor.optim.lr": run.lr}),
    }


def isosim_settings(run: Run, hw: Hardware, log_dir: str) -> dict[str, Any]:
    """``llm_runs.training.train`` settings: the run stops at its budget of ``steps * B_p * n``."""
    lr = {} if run.lr is None else {"lr": run.lr, "base_lr": run.base_lr, "lr_rule": run.lr_rule,
                                    "lr_ref_batch": run.lr_ref_batch or LR_REF_BATCH}
    return {"n": run.n, "b_p": run.b_p, "budget": run.rollouts, "seed": run.seed, "out": log_dir, **lr}


SETTINGS = {"trl": trl_settings, "verl": verl_settings, "isosim": isosim_settings}

CHECKPOINTS = 10
"""how many times a full-budget run saves a checkpoint (the last two kept): launched again after an
interruption, it resumes from the last one. The cheap runs are short and save none."""


def checkpointed(trainer: str, run: Run) -> int | None:
    """Make ``run`` (a full-budget run) save a checkpoint every ``steps / CHECKPOINTS`` steps, keep the
    last two, and resume from the last one when launched again: TRL's ``save_strategy: steps`` (isosim's
    ``train_grpo.py`` resumes from the newest ``checkpoint-*`` of its ``output_dir``); verl's
    ``trainer.save_freq`` with ``resume_mode: auto`` (it resumes from ``default_local_dir``). isosim's own
    runner checkpoints and resumes by itself (None: nothing set here). The steps between two checkpoints."""
    every = max(run.steps // CHECKPOINTS, 1)
    if trainer == "trl":
        run.settings.update({"save_strategy": "steps", "save_steps": every, "save_total_limit": 2})
    elif trainer == "verl":
        run.settings.update({"trainer.save_freq": every, "trainer.resume_mode": "auto",
                             "trainer.max_actor_ckpt_to_keep": 2})
    else:
        return None
    return every


def make_run(trainer: str, n: int, b_p: int, steps: int, seed: int, hw: Hardware, log_dir: str,
             name: str | None = None, lr: tuple | None = None) -> Run:
    """One run with its trainer's settings, checked against the trainer's rules; ``lr``: (BASE, rule)
    or (BASE, rule, reference batch), the run's learning rate by that rule from BASE at the
    reference batch (default 1024; None: the trainer's default)."""
    check_n(n)
    check_split(trainer, n, b_p, hw.processes)
    if steps < 1:
        raise IsosimError(f"n = {n}: B_p x n = {b_p * n} rollouts per step leaves no whole step in the budget")
    run = Run(name or run_name(n, seed), n, b_p, steps, seed)
    if lr is not None:
        run.base_lr, run.lr_rule = float(lr[0]), lr[1]
        run.lr_ref_batch = float(lr[2]) if len(lr) > 2 else float(LR_REF_BATCH)
        run.lr = lr_for(n, b_p, run.base_lr, run.lr_rule, run.lr_ref_batch)
    run.settings = SETTINGS[trainer](run, hw, log_dir)
    per_device, accum = micro_batch(n, b_p, hw)
    if accum > 1 and trainer != "isosim":
        run.notes.append(f"{accum} micro-batches of {per_device} completions per device per update "
                         f"(--max-per-device {hw.per_device})")
    return run


def check_trl(s: dict[str, Any], processes: int) -> None:
    """TRL 1.16's own checks of these arguments (``GRPOConfig.__post_init__``), for any process count."""
    gen = s["per_device_train_batch_size"] * processes * s["steps_per_generation"]
    if gen % s["num_generations"]:
        raise IsosimError(f"generation_batch_size ({gen}) must be divisible by num_generations ({s['num_generations']})")
    if s["num_generations"] < 2:
        raise IsosimError("GRPO requires at least 2 generations per prompt")


def check_verl(s: dict[str, Any]) -> None:
    """verl 0.9.1's checks of these overrides (``validate_config``, ``ActorConfig.validate``, the
    micro-batch split of ``verl/workers/engine/utils.py``)."""
    gpus = s["trainer.n_gpus_per_node"] * s["trainer.nnodes"]
    tbs, n = s["data.train_batch_size"], s["actor_rollout_ref.rollout.n"]
    mini = s["actor_rollout_ref.actor.ppo_mini_batch_size"]
    micro = s["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]
    if (tbs * n) % gpus:
        raise IsosimError(f"real_train_batch_size ({tbs * n}) must be divisible by minimal possible batch size ({gpus})")
    if tbs < mini:
        raise IsosimError(f"train_batch_size ({tbs}) must be >= actor.ppo_mini_batch_size ({mini})")
    if (mini * n // gpus) % micro:
        raise IsosimError("data size must be divisible by force_group_size * micro_batch_size_per_gpu")


def summary(run: Run) -> dict[str, Any]:
    return asdict(run) | {"rollouts": run.rollouts}
