"""One simulated run's configuration, validated on construction.

Every knob is a field with a one-line docstring. Runs that differ only in allocation (``n``,
``b_p``, ``budget``), optimisation (``lr``...) or seeds share one problem population per
``data_seed`` and advance together as one batched computation (``isosim.sim.engine``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass, field
from typing import Literal

from isosim.errors import IsosimError
from isosim.sim.allocation import check_rule
from isosim.sim.profiles import get_profile

POLICIES = ("linear", "tabular", "mlp")
ADVANTAGES = ("grpo", "drgrpo")
OPTIMIZERS = ("sgd", "adam", "adamw")
LR_RULES = ("sqrt", "linear", "constant")
LR_POWER = {"sqrt": 0.5, "linear": 1.0, "constant": 0.0}
"""the exponent of each lr rule: lr = base * (B / B_ref) ** power, B = B_p * n rollouts a step"""
LR_REF_BATCH = 1024
"""the reference rollout batch B_ref of the lr rules (the paper's; SimConfig.b_ref and
llm_runs' lr_ref_batch default to it)"""
MAX_BUDGET = 1e13
"""the largest budget any command takes: 1e13 rollouts is a million times the paper's largest sweep
(at 10,000 rollouts a second, 30 years of sampling)"""


def check_lr_rule(rule: str) -> str:
    """``rule`` if it is one of :data:`LR_RULES`, else one clear error."""
    if rule not in LR_POWER:
        raise IsosimError(f"unknown lr rule {rule!r} (use {', '.join(LR_RULES)})")
    return rule


def scaled_lr(base: float, batch: float, ref_batch: float = LR_REF_BATCH, rule: str = "sqrt") -> float:
    """The learning rate of a run whose steps spend ``batch`` = B_p * n rollouts, by ``rule`` from
    ``base`` at ``ref_batch``: ``base * (batch / ref_batch) ** LR_POWER[rule]``."""
    return float(base) * (float(batch) / float(ref_batch)) ** LR_POWER[check_lr_rule(rule)]
ADDED_FIELD_DEFAULTS = (("lr_power", None), ("loading_dist", "uniform"), ("allocation", "uniform"))
"""SimConfig fields added after run ids and plan ids were first written: at these values they are
left out of both, so the ids of earlier runs and plans stay as they were"""


@dataclass(frozen=True)
class SimConfig:
    """A simulated GRPO run on a population of bandit problems."""

    # --- allocation -------------------------------------------------------------------
    n: int = 8
    """rollouts per problem (GRPO group size)"""
    b_p: int = 32
    """problems per batch"""
    budget: float | None = 1e6
    """sampling budget in rollouts; the run takes floor(budget / (b_p * n)) steps"""
    steps: int | None = None
    """number of update steps; if set it replaces the budget"""
    seed: int = 0
    """seed of the run's sampling noise (rollouts, problem order)"""
    data_seed: int | None = None
    """seed of the problem population (default: ``seed``)"""
    allocation: str = "uniform"
    """per-problem rollout rule (isosim.sim.allocation.RULES): every problem gets ``n``
    (uniform), or a rule spreads the same ``b_p * n`` rollouts per step over the batch from each
    problem's pass rate as estimated from its own sampled history"""

    # --- problems ---------------------------------------------------------------------
    profile: str = "easy"
    """difficulty profile of base pass@1 (see isosim.sim.profiles)"""
    n_train: int = 512
    """training problems"""
    n_val: int = 512
    """held-out validation problems (same clusters; same profile unless ``val_profile``)"""
    val_profile: str | None = None
    """difficulty profile of the validation problems when it differs from the training one
    (out-of-domain or per-difficulty evaluation). When set, the training problems are the same
    whatever ``val_profile`` is, so runs that differ only in it train identically"""
    responses: int = 16
    """K, candidate responses per problem"""
    correct_min: int = 1
    """fewest correct responses per problem"""
    correct_max: int = 4
    """most correct responses per problem"""

    # --- policy -----------------------------------------------------------------------
    policy: Literal["linear", "tabular", "mlp"] = "linear"
    """linear features x shared parameters, independent per-problem logits, or a small MLP"""
    clusters: int = 8
    """skill clusters; correct responses of a cluster share a skill direction"""
    skill: float = 1.0
    """strength of the shared skill features (transfer and generalisation)"""
    transfer_frac: float = 0.5
    """share of problems whose correct responses load on their cluster's skill"""
    loading_lo: float = 0.3
    """smallest skill loading of a transferring problem"""
    loading_hi: float = 1.0
    """largest skill loading of a transferring problem"""
    loading_dist: Literal["uniform", "loguniform"] = "uniform"
    """how the loadings of transferring problems spread over [loading_lo, loading_hi]: uniformly,
    or log-uniformly (learning speeds spread evenly over decades: a slow, steady rise)"""
    hard_loading: float = 1.0
    """multiplier on the loading of problems with base pass@1 < 1/16 (distance to travel)"""
    hard_clusters: int = 0
    """if > 0, problems with base pass@1 < 1/16 take their skill cluster from the last
    ``hard_clusters`` of the ``clusters`` clusters and all other problems from the rest, so hard
    and easier problems share no skill direction (only typicality and memorisation); 0: every
    problem from every cluster"""
    memorize: float = 0.0
    """strength of random problem-specific features (memorisation, interference)"""
    mem_dim: int = 64
    """dimension of the problem-specific feature space"""
    typicality: float = 0.0
    """strength of a global direction along base log-probability (sharpening)"""
    tabular: float = 0.0
    """strength of a per-problem tabular part added to the linear policy"""
    hidden: int = 32
    """hidden width of the mlp policy"""

    # --- update -----------------------------------------------------------------------
    adv: Literal["grpo", "drgrpo"] = "grpo"
    """group-normalised advantages (grpo) or mean-only (drgrpo, Dr.GRPO)"""
    n_est: int | None = None
    """decoupled baseline: estimate the group mean from n_est >= n rollouts, update on n"""
    zero_var_filter: bool = False
    """drop groups whose rewards are all equal from the loss (and its normaliser)"""
    kl: float = 0.0
    """coefficient of KL(policy || base) in the loss (advantage units)"""
    entropy: float = 0.0
    """coefficient of the entropy bonus"""
    wd: float = 0.0
    """weight decay: L2 in the gradient for sgd/adam, decoupled for adamw"""
    optimizer: Literal["sgd", "adam", "adamw"] = "sgd"
    """optimizer of the shared parameters"""
    lr: float = 2.0
    """base learning rate at the reference batch ``b_ref``"""
    lr_rule: Literal["sqrt", "linear", "constant"] = "sqrt"
    """lr = lr * (b_p * n / b_ref) ** {0.5, 1, 0}"""
    lr_power: float | None = None
    """if set, the exponent of the batch-size rule instead of ``lr_rule``'s (a fitted lr mapping:
    how much faster per step a larger rollout batch moves the policy; ``isosim.predict.dynamics``)"""
    b_ref: int = LR_REF_BATCH
    """reference rollout batch of the lr rule"""
    beta1: float = 0.9
    """Adam first-moment decay"""
    beta2: float = 0.999
    """Adam second-moment decay"""
    warmup: int = 0
    """linear warm-up steps"""
    clip_grad: float | None = None
    """clip each run's gradient to this global norm"""
    trust_region: float | None = None
    """cap on the largest change of any batch logit in one step"""

    # --- evaluation -------------------------------------------------------------------
    k: int = 4
    """k of best@k / worst@k"""
    eval_points: int = 20
    """log-spaced evaluation points between the first step and the budget (plus step 0)"""
    eval_samples: int = 0
    """if > 0, also report sampled avg/best/worst estimates from this many samples per problem"""
    mean_len: float | None = None
    """mean response length in tokens (a lognormal length per response); None: no tokens"""

    name: str = ""
    """free-form label carried into the records"""
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    """other settings carried into the records untouched"""

    def __post_init__(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise IsosimError(msg)

        need(isinstance(self.n, int) and self.n >= 1, f"n must be an integer >= 1 (got {self.n!r})")
        need(isinstance(self.b_p, int) and self.b_p >= 1, f"b_p must be an integer >= 1 (got {self.b_p!r})")
        need(self.n_train >= 1 and self.n_val >= 1, "n_train and n_val must be >= 1")
        need(self.b_p <= self.n_train,
             f"b_p ({self.b_p}) cannot exceed the training set ({self.n_train} problems): "
             "a batch holds distinct problems")
        need(self.responses >= 2, f"responses (K) must be >= 2 (got {self.responses})")
        need(1 <= self.correct_min <= self.correct_max < self.responses,
             "need 1 <= correct_min <= correct_max < responses (some response must be wrong)")
        if self.steps is not None:  # a step count replaces the budget
            object.__setattr__(self, "budget", None)
        need(self.budget is not None or self.steps is not None, "set a budget (rollouts) or a number of steps")
        if self.budget is not None:
            need(self.budget > 0, f"budget must be positive (got {self.budget})")
            need(self.budget >= self.b_p * self.n,
                 f"budget {self.budget:g} is below one step (b_p * n = {self.b_p * self.n})")
        if self.steps is not None:
            need(self.steps >= 1, f"steps must be >= 1 (got {self.steps})")
        need(self.policy in POLICIES, f"unknown policy {self.policy!r} (use {', '.join(POLICIES)})")
        need(self.adv in ADVANTAGES, f"unknown advantage {self.adv!r} (use {', '.join(ADVANTAGES)})")
        need(self.optimizer in OPTIMIZERS, f"unknown optimizer {self.optimizer!r} (use {', '.join(OPTIMIZERS)})")
        need(self.lr_rule in LR_RULES, f"unknown lr rule {self.lr_rule!r} (use {', '.join(LR_RULES)})")
        need(self.n_est is None or self.n_est >= self.n, "n_est (decoupled baseline) must be >= n")
        check_rule(self.allocation)
        need(self.allocation == "uniform" or (self.n_est is None and not self.zero_var_filter),
             f"allocation {self.allocation!r} takes neither a decoupled baseline (n_est) nor zero_var_filter")
        need(self.lr > 0, "lr must be positive")
        need(self.lr_power is None or -1.0 <= self.lr_power <= 2.0, "lr_power must lie in [-1, 2]")
        need(self.clusters >= 1 and self.mem_dim >= 1 and self.hidden >= 1, "clusters, mem_dim, hidden must be >= 1")
        need(0 <= self.hard_clusters < self.clusters,
             f"hard_clusters must lie in [0, clusters) (got {self.hard_clusters})")
        need(0.0 <= self.transfer_frac <= 1.0, "transfer_frac must lie in [0, 1]")
        need(0.0 <= self.loading_lo <= self.loading_hi, "need 0 <= loading_lo <= loading_hi")
        need(self.loading_dist in ("uniform", "loguniform"), "loading_dist must be uniform or loguniform")
        need(self.loading_dist == "uniform" or self.loading_lo > 0, "a log-uniform loading needs loading_lo > 0")
        need(min(self.kl, self.entropy, self.wd, self.skill, self.memorize, self.typicality, self.tabular) >= 0,
             "kl, entropy, wd and feature strengths must be >= 0")
        need(self.k >= 1 and self.eval_points >= 1 and self.eval_samples >= 0, "k, eval_points must be >= 1")
        need(self.clip_grad is None or self.clip_grad > 0, "clip_grad must be positive")
        need(self.trust_region is None or self.trust_region > 0, "trust_region must be positive")
        need(self.mean_len is None or self.mean_len > 0, "mean_len must be positive")
        get_profile(self.profile)  # raises on an unknown or malformed profile
        if self.val_profile is not None:
            get_profile(self.val_profile)

    # --- derived values ---------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        """Update steps this run takes."""
        if self.steps is not None:
            return self.steps
        return int(self.budget // (self.b_p * self.rollouts_per_step))

    @property
    def rollouts_per_step(self) -> int:
        """Rollouts one step spends per problem (n, or n_est with a decoupled baseline)."""
        return self.n_est if self.n_est is not None else self.n

    @property
    def step_lr(self) -> float:
        """The lr after the batch-size rule."""
        if self.lr_power is None:
            return scaled_lr(self.lr, self.b_p * self.n, self.b_ref, self.lr_rule)
        return self.lr * (self.b_p * self.n / self.b_ref) ** self.lr_power

    @property
    def dense_features(self) -> bool:
        """Whether the run's policy reads dense memorisation features (``memorize`` > 0, a policy other
        than tabular): each problem slot of a step then gathers and multiplies ``K x mem_dim`` rows."""
        return self.memorize > 0 and self.policy != "tabular"

    @property
    def population_key(self) -> tuple:
        """Settings that fix the problem population (runs sharing it share problems)."""
        return (
            self.profile, self.val_profile, self.n_train, self.n_val, self.responses, self.correct_min,
            self.correct_max, self.clusters, self.transfer_frac, self.loading_lo,
            self.loading_hi, self.loading_dist, self.hard_loading, self.hard_clusters, self.mem_dim, self.hidden, self.mean_len,
            self.data_seed if self.data_seed is not None else self.seed,
        )

    @property
    def batch_key(self) -> tuple:
        """Settings that must agree for runs to share one batched computation."""
        return (
            self.policy, self.n_train, self.n_val, self.responses, self.mem_dim,
            self.hidden, self.clusters, self.k, self.eval_samples > 0, self.allocation != "uniform",
        )

    @functools.cached_property
    def run_id(self) -> str:
        """Stable id: readable allocation plus a hash of every other setting."""
        d = dataclasses.asdict(self)
        d["extra"] = sorted(d["extra"].items())
        for key, default in (("val_profile", None), ("hard_clusters", 0), *ADDED_FIELD_DEFAULTS):
            if d[key] == default:  # keeps the ids of runs from before the field existed
                del d[key]
        digest = hashlib.sha1(repr(sorted(d.items())).encode()).hexdigest()[:8]
        label = self.name or self.profile.replace("/", "_").replace(":", "").replace(",", "_")
        return f"{label}-n{self.n}-bp{self.b_p}-s{self.seed}-{digest}"

    def replace(self, **changes) -> "SimConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def settings(self) -> dict:
        """Flat dict of the settings, for the records table."""
        d = dataclasses.asdict(self)
        extra = d.pop("extra")
        d["data_seed"] = self.data_seed if self.data_seed is not None else self.seed
        d["lr_base"] = d.pop("lr")
        d["lr"] = self.step_lr
        if d["allocation"] == "uniform":  # (records of uniform runs keep the columns they had)
            del d["allocation"]
        d.update(extra)
        return d
