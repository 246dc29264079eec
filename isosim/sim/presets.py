"""Built-in simulator presets: a difficulty profile plus the recipe the paper runs on it.

Each preset is a dict of ``SimConfig`` fields. Like the paper, the presets train easy sets (and
very easy ones) with a KL loss to the base policy and an entropy bonus, and hard sets, extreme
sets and mixes with neither; every preset uses AdamW (weight decay 0.01) with the square-root lr
rule. Measured numbers for every claim below are in studies/LOG.md and studies/FINDINGS.md.

Easy recipe (``easy``, ``very-easy``). *Why n*(C) rises:* KL to the base policy with
std-normalised GRPO advantages. A group whose n draws are all correct (or all wrong) carries no
signal, so the expected update on a problem with pass rate p shrinks by
``S_n(p) = E[sqrt(mu (1 - mu))] / sqrt(p (1 - p))``, which grows with n, while the KL pull does
not; the equilibrium pass rate rises with n and small n, which takes more steps per rollout, wins
at small budgets. *Why it saturates inside the grid:* interference through problem-specific
directions (``memorize``): every update also moves directions that belong to single training
problems and act as noise on the validation problems. Measured: beyond a point a larger n
loses validation reward (at 1e7 rollouts the curve over n peaks at 256-512 and falls by 15-18
points at 2048), so n* stops rising (n_sat 269-555 on five untuned seeds of the default grid)
instead of drifting to the largest n among near ties, which is what the KL pull alone gives
(memorize 0: n_sat 2048). Our reading: the wider the group, the more training problems (down to
the rare correct answers of the hardest ones) get signal and push their own directions.

Hard recipe (``hard``, ``extreme``, mixes of at least half hard problems). No KL and no entropy bonus. *The restoring force is
AdamW's decoupled weight decay:* its fixed point ``wd * theta = E[g] / sqrt(E[g^2])`` rises with
the signal-to-noise ratio of the update, which grows with n until problem sampling dominates; on
a hard set few problems carry signal, so problem sampling dominates early and n* saturates lower
(n_sat 32-73 on five untuned seeds of the default grid; still 64 at 4e7 rollouts: a plateau,
not a lag).
Problems with base pass@1 < 1/16 load on the shared skill directions with a smaller loading
(``hard_loading`` = 0.3): they need more parameter travel. Without weight decay nothing pulls
back and n* stays at the smallest n. Interference is off in this recipe: without a KL anchor
the problem-specific directions swamp the dependence on n (memorize 1-4: n* stuck at 8 or
jumping on noise).

Flat regime (``hard-flat``, ``easy-flat``, ``extreme-flat``, ``very-easy-flat``): the regime of a
learner whose best n does not move with the budget (the organism of ``docs/organism.md``). Adam
at a constant lr (the same step size for every n: ``lr_rule`` constant), no weight decay, no KL,
no entropy bonus. Under Adam a step moves about lr once the gradient's direction is clear, so a
larger group buys a cleaner direction, not a longer step: the gain per step saturates in n (at
n = 8-32 on the organism's hard profile), and with no restoring force every n climbs to the same
ceiling (the share of problems that transfer). The ablation that found it: ``docs/simulator.md``
("The flat regime"). The default presets above keep the paper's rising regime.

Earlier rounds stay available for comparison: ``easy-distance``, ``hard-distance``,
``very-easy-distance``, ``extreme-distance`` (the previous defaults: Adam, KL 1.0 + entropy .01
on every set, hard problems far; saturation from the KL pull, F2 as a lag; the committed studies
were measured with them) and ``easy-kl`` / ``hard-kl`` (SGD, per-set KL 1.0 / 0.3).
"""

from __future__ import annotations

import numpy as np

from isosim.errors import IsosimError
from isosim.sim.profiles import HARD_P, get_profile
from isosim.sim.profiles import PRESETS as PROFILE_PRESETS

COMMON = dict(
    responses=16, correct_min=1, correct_max=4, clusters=8, transfer_frac=0.5,
    loading_lo=0.3, loading_hi=1.0, n_train=512, n_val=512, b_p=32,
    policy="linear", adv="grpo", lr_rule="sqrt", b_ref=1024, k=4,
)
"""problem structure and allocation shared by every preset"""

OPTIMIZER = dict(optimizer="adamw", beta1=0.9, beta2=0.999, lr=0.2, wd=0.01, hard_loading=0.3)
"""AdamW with decoupled weight decay, base lr at 1,024 rollouts a step; hard problems far"""

EASY_RECIPE = dict(OPTIMIZER, kl=1.5, entropy=0.01, memorize=3.0)
"""the paper's easy recipe (KL to the base + entropy bonus), with interference"""

HARD_RECIPE = dict(OPTIMIZER, kl=0.0, entropy=0.0, memorize=0.0)
"""the paper's hard recipe (neither KL nor entropy bonus)"""

DISTANCE = dict(optimizer="adam", beta1=0.9, beta2=0.999, lr=0.05, kl=1.0, entropy=0.01, wd=0.0,
                hard_loading=0.05)
"""the previous default (one recipe for every set: Adam, KL 1.0 + entropy .01, hard problems far)"""

ROUND3 = dict(optimizer="sgd", lr=2.0, entropy=0.01, hard_loading=1.0)
"""FIDELITY round 3: SGD, KL set per difficulty (easy 1.0, hard 0.3), no distance mechanism"""

FLAT = dict(optimizer="adam", beta1=0.9, beta2=0.999, lr=1.0, lr_rule="constant", wd=0.0, kl=0.0, entropy=0.0,
            memorize=0.0, hard_loading=0.3)
"""the flat regime: Adam at a constant lr (a step of about lr at every n), nothing pulling back"""

RECIPE_OF_PROFILE = {"easy": "easy", "very-easy": "easy", "hard": "hard", "extreme": "hard"}
"""the paper's recipe for each named difficulty (mixes: :func:`recipe_for`)"""

RECIPES = {"easy": EASY_RECIPE, "hard": HARD_RECIPE}

PRESETS: dict[str, dict] = {
    **{name: dict(COMMON, **RECIPES[recipe], profile=name) for name, recipe in RECIPE_OF_PROFILE.items()},
    **{f"{name}-distance": dict(COMMON, **DISTANCE, profile=name) for name in RECIPE_OF_PROFILE},
    **{f"{name}-flat": dict(COMMON, **FLAT, profile=name) for name in RECIPE_OF_PROFILE},
    "easy-kl": dict(COMMON, **ROUND3, profile="easy", kl=1.0),
    "hard-kl": dict(COMMON, **ROUND3, profile="hard", kl=0.3),
}


def hard_share(profile_spec: str, draws: int = 4096) -> float:
    """Share of problems with base pass@1 below 1/16 under a profile (a seeded sample)."""
    p = get_profile(profile_spec).sample(draws, np.random.default_rng(0))
    return float((p < HARD_P).mean())


def recipe_for(profile_spec: str) -> str:
    """The paper's recipe for a set: ``hard`` (no KL, no entropy bonus) when at least half its
    problems have base pass@1 below 1/16 (its hard sets and 50/50 mixes), else ``easy``."""
    return "hard" if hard_share(profile_spec) >= 0.5 else "easy"


def get_preset(name: str) -> dict:
    """SimConfig fields of a preset; a mix such as ``hard:0.5,easy:0.5`` gets the recipe the paper
    runs on it (:func:`recipe_for`: the hard recipe when at least half its problems are hard, as
    in the paper's mixes, else the easy one)."""
    if name in PRESETS:
        return dict(PRESETS[name])
    profile = get_profile(name)  # raises a clear IsosimError on anything unknown
    if profile.kind == "mix":
        return dict(COMMON, **RECIPES[recipe_for(name)], profile=name)
    raise IsosimError(
        f"unknown preset {name!r}: use one of {', '.join(PRESETS)} or a mix of "
        f"{', '.join(PROFILE_PRESETS)} such as 'hard:0.5,easy:0.5' (or --profile FILE)"
    )
