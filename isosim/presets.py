"""Built-in simulator presets: a difficulty profile plus the mechanism settings that go with it.

Each preset is a dict of ``SimConfig`` fields. The default presets (``easy``, ``hard``,
``very-easy``, ``extreme`` and mixes) share ONE recipe; only the problems differ. Measured
numbers for every claim below are in studies/LOG.md (2026-12-02) and studies/FINDINGS.md.

Mechanism 1, why n*(C) rises and then saturates (F1): *KL to the base policy with std-normalised
GRPO advantages.* A group whose n draws are all correct (or all wrong) carries no signal, so the
expected update on a problem with pass rate p shrinks by
``S_n(p) = E[sqrt(mu (1 - mu))] / sqrt(p (1 - p))``, which grows with n, while the KL pull
towards the base policy does not depend on n. The equilibrium pass rate rises with n and stops
rising once ``p*^n`` is negligible; small n, which takes many more steps per rollout, wins at
small budgets. Switched off (``kl=0``) every n reaches the same asymptote and n* stays small.

Mechanism 2, why hard problems saturate at a smaller n under the same recipe (F2): *distance
under bounded Adam steps.* Problems with base pass@1 < 1/16 load on the shared skill directions
with a smaller loading (``hard_loading`` = 0.05), so they need more parameter travel to improve.
Under Adam each step moves the parameters by about ``lr``, so a run covers a distance of about
``lr * M = base_lr * C / sqrt(1024 * B_p * n)``: width eats the steps hard problems need, and
their n* saturates lower (QUICK: 8 vs 32; MEDIUM: 32 vs 64). With ``hard_loading=1`` the hard
set's n* climbs to the largest n. Caveat: it is a lag; at much larger budgets hard n* rises.

Side effects of the same recipe: B_p matters little (Adam's step does not scale with the
gradient's size, F5); coverage (best@4) gains on hard vs sharpening (worst@4) gains on easy
follow from where pass rates sit (d best@k = k (1-p)^(k-1) dp, d worst@k = k p^(k-1) dp; F3).

The round-3 recipe (SGD, per-set KL 1.0 / 0.3, no distance mechanism) stays available as
``easy-kl`` and ``hard-kl`` for comparison.
"""

from __future__ import annotations

from isosim.errors import IsosimError
from isosim.profiles import PRESETS as PROFILE_PRESETS
from isosim.profiles import get_profile

COMMON = dict(
    responses=16, correct_min=1, correct_max=4, clusters=8, transfer_frac=0.5,
    loading_lo=0.3, loading_hi=1.0, n_train=512, n_val=512, b_p=32,
    policy="linear", adv="grpo", lr_rule="sqrt", b_ref=1024, k=4,
)
"""problem structure and allocation shared by every preset"""

RECIPE = dict(optimizer="adam", beta1=0.9, beta2=0.999, lr=0.05, kl=1.0, entropy=0.01, wd=0.0,
              hard_loading=0.05)
"""the single default recipe: Adam, KL 1.0 + entropy .01 (advantage units), hard problems far"""

ROUND3 = dict(optimizer="sgd", lr=2.0, entropy=0.01, hard_loading=1.0)
"""FIDELITY round 3: SGD, KL set per difficulty (easy 1.0, hard 0.3), no distance mechanism"""

PRESETS: dict[str, dict] = {
    "easy": dict(COMMON, **RECIPE, profile="easy"),
    "very-easy": dict(COMMON, **RECIPE, profile="very-easy"),
    "hard": dict(COMMON, **RECIPE, profile="hard"),
    "extreme": dict(COMMON, **RECIPE, profile="extreme"),
    "easy-kl": dict(COMMON, **ROUND3, profile="easy", kl=1.0),
    "hard-kl": dict(COMMON, **ROUND3, profile="hard", kl=0.3),
}


def get_preset(name: str) -> dict:
    """SimConfig fields of a preset; a mix such as ``hard:0.5,easy:0.5`` gets the default recipe
    (the same for every difficulty)."""
    if name in PRESETS:
        return dict(PRESETS[name])
    profile = get_profile(name)  # raises a clear IsosimError on anything unknown
    if profile.kind == "mix":
        return dict(PRESETS["easy"], profile=name)
    raise IsosimError(
        f"unknown preset {name!r}: use one of {', '.join(PRESETS)} or a mix of "
        f"{', '.join(PROFILE_PRESETS)} such as 'hard:0.5,easy:0.5' (or --profile FILE)"
    )
