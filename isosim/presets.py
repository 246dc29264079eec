"""Built-in simulator presets: a difficulty profile plus the mechanism settings that go with it.

Each preset is a dict of ``SimConfig`` fields. The mechanism (see studies/LOG.md and the README's
fidelity table) is what makes the compute-optimal ``n`` rise with budget and then saturate:

*KL to the base policy with std-normalised GRPO advantages.* A group whose n draws are all
correct (or all wrong) carries no signal, so the expected update on a problem with pass rate p
shrinks by ``S_n(p) = E[sqrt(mu (1 - mu))] / sqrt(p (1 - p))``, which grows with n, while the
KL pull towards the base policy does not depend on n. The equilibrium pass rate therefore rises
with n and stops rising once ``p*^n`` is negligible: validation reward keeps improving with n up
to a saturation point, and small n, which takes many more steps per rollout, wins at small
budgets. Harder problems sit further from that equilibrium, so their KL is set lower.
"""

from __future__ import annotations

from isosim.errors import IsosimError
from isosim.profiles import PRESETS as PROFILE_PRESETS
from isosim.profiles import get_profile

COMMON = dict(
    responses=16, correct_min=1, correct_max=4, clusters=8, transfer_frac=0.5,
    loading_lo=0.3, loading_hi=1.0, n_train=512, n_val=512, b_p=32,
    policy="linear", adv="grpo", optimizer="sgd", lr=2.0, lr_rule="sqrt", b_ref=1024,
    entropy=0.01, k=4,
)

PRESETS: dict[str, dict] = {
    "easy": dict(COMMON, profile="easy", kl=1.0),
    "very-easy": dict(COMMON, profile="very-easy", kl=1.0),
    "hard": dict(COMMON, profile="hard", kl=0.3),
    "extreme": dict(COMMON, profile="extreme", kl=0.3),
}


def get_preset(name: str) -> dict:
    """SimConfig fields of a preset; a mix such as ``hard:0.5,easy:0.5`` gets the hard recipe
    if it contains hard or extreme problems, else the easy one."""
    if name in PRESETS:
        return dict(PRESETS[name])
    profile = get_profile(name)  # raises a clear IsosimError on anything unknown
    if profile.kind == "mix":
        names = {part.spec for _, part in profile.parts}
        recipe = "hard" if names & {"hard", "extreme"} else "easy"
        return dict(PRESETS[recipe], profile=name)
    raise IsosimError(
        f"unknown preset {name!r}: use one of {', '.join(PRESETS)} or a mix of "
        f"{', '.join(PROFILE_PRESETS)} such as 'hard:0.5,easy:0.5' (or --profile FILE)"
    )
