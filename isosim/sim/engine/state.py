"""The state of a batch of runs that advance together (:class:`_Batch`): parameters, optimizer
moments, per-run settings as tensors and the flags derived from them. Its own module, below the
steps that read it (:mod:`grpo`, :mod:`optim`) and the loop that drives it (:mod:`batch`)."""

from __future__ import annotations

import math

import torch

from isosim.sim import advantage as adv
from isosim.sim.engine.evaluation import eval_steps
from isosim.sim.engine.streams import DIRECT_MAX, RunStreams, correct_only


# ----------------------------------------------------------------------------------------
# A batch of runs
# ----------------------------------------------------------------------------------------
class _Batch:
    """State of the active runs: every tensor has a leading run axis.

    ``vec`` holds per-run settings and counters as tensors; flags derived from the configs
    (which runs use Adam, a decoupled baseline...) are recomputed only when runs leave.
    """

    VEC_FIELDS = {  # name: (SimConfig -> value, dtype kind)
        "n": (lambda c: c.n, "f"),
        "n_roll": (lambda c: c.rollouts_per_step, "f"),
        "b_p": (lambda c: c.b_p, "f"),
        "lr": (lambda c: c.step_lr, "f"),
        "kl": (lambda c: c.kl, "f"),
        "ent": (lambda c: c.entropy, "f"),
        "wd": (lambda c: c.wd, "f"),
        "beta1": (lambda c: c.beta1, "f"),
        "beta2": (lambda c: c.beta2, "f"),
        "warmup": (lambda c: c.warmup, "f"),
        "clip": (lambda c: c.clip_grad if c.clip_grad is not None else math.inf, "f"),
        "trust": (lambda c: c.trust_region if c.trust_region is not None else math.inf, "f"),
        "adam": (lambda c: c.optimizer in ("adam", "adamw"), "b"),
        "adamw": (lambda c: c.optimizer == "adamw", "b"),
        "grpo": (lambda c: c.adv == "grpo", "b"),
        "zero_var": (lambda c: c.zero_var_filter, "b"),
    }

    def __init__(self, cfgs, pop, pop_idx, scale, tab_scale, params, Bmax, device, dtype):
        self.cfgs = list(cfgs)
        self.streams = [RunStreams(c) for c in cfgs]
        self.schedule = [eval_steps(c) for c in cfgs]
        self.params = params
        self.m1 = {k: torch.zeros_like(v) for k, v in params.items()}
        self.m2 = {k: torch.zeros_like(v) for k, v in params.items()}
        kinds = {"f": dtype, "b": torch.bool}
        self.vec = {name: torch.as_tensor([get(c) for c in cfgs], dtype=kinds[kind], device=device)
                    for name, (get, kind) in self.VEC_FIELDS.items()}
        self.vec.update(
            scale=scale, tab_scale=tab_scale, pop_idx=pop_idx,
            b_mask=torch.as_tensor([[j < c.b_p for j in range(Bmax)] for c in cfgs], device=device),
            rollouts=torch.zeros(len(cfgs), dtype=dtype, device=device),
            tokens=torch.zeros(len(cfgs), dtype=dtype, device=device),
        )
        self._flags()

    def _flags(self) -> None:
        cfgs = self.cfgs
        # (a rule's groups draw from uniforms whatever their size: isosim.sim.engine.allocated)
        self.big = [r for r, c in enumerate(cfgs) if c.n > DIRECT_MAX and c.allocation == "uniform"]
        co = [correct_only(c) for c in cfgs]
        self.all_co, self.any_co = all(co), any(co)
        self.big_counts = [r for r in self.big if not co[r]]  # large n, per-response counts
        self.big_correct = [r for r in self.big if co[r]]  # large n, correct draws only
        self.decoupled = [r for r, c in enumerate(cfgs) if c.rollouts_per_step > c.n]
        self.any = {name: bool(self.vec[name].any()) for name in ("adam", "adamw", "grpo", "zero_var")}
        self.any["clip"] = any(c.clip_grad is not None for c in cfgs)
        self.any["trust"] = any(c.trust_region is not None for c in cfgs)
        self.any["warmup"] = any(c.warmup > 0 for c in cfgs)
        self.any["wd"] = any(c.wd > 0 for c in cfgs)
        self.any_reg = any(c.kl > 0 or c.entropy > 0 for c in cfgs)
        # per-run constants shaped for broadcasting, recomputed only when runs leave
        v = self.vec
        # some run uses fewer slots than the batch is wide (a padded problem's KL / entropy pull is not
        # zero). The batch narrows to the widest b_p still going when runs leave (keep(width=...)), but an
        # allocation rule's batch keeps the width it started with
        self.masked = not bool(v["b_mask"].all())
        self.const = {
            "n": v["n"][:, None],
            "n_base": v["n_roll"][:, None],  # draws behind the baseline (n unless decoupled)
            "var_factor": adv.bessel(v["n_roll"])[:, None],  # unbiased variance
            "pg_scale": (-1.0 / (v["b_p"] * v["n"]))[:, None],  # loss normalisation, sign of descent
            "reg_scale": (1.0 / v["b_p"])[:, None],
            "spent": v["n_roll"] * v["b_p"],
            "std_norm": (True if all(c.adv == "grpo" for c in cfgs) else v["grpo"][:, None]) if self.any["grpo"] else None,
            # per group [R, 1] (the closed-form step); per response [R, 1, 1] below
            "kl_ent_g": (v["kl"] + v["ent"])[:, None],
            "ent_g": v["ent"][:, None],
            "is_dec_g": (v["n_roll"] > v["n"])[:, None].to(v["n"].dtype) if self.decoupled else None,
            "co": torch.as_tensor(co, device=v["n"].device)[:, None] if self.any_co and not self.all_co else None,
        }
        self.const.update(kl=v["kl"][:, None, None], ent=self.const["ent_g"][..., None],
                          is_dec=self.const["is_dec_g"][..., None] if self.decoupled else None)
        self.spent_total = float(sum(c.rollouts_per_step * c.b_p for c in cfgs))
        def one(name: str):  # the value every run shares, or None
            values = {getattr(c, name) for c in cfgs}
            return values.pop() if len(values) == 1 else None

        # Adam with the same betas and no weight decay / clipping / warm-up in every run: scalar fast path
        self.plain_adam = (all(c.optimizer == "adam" for c in cfgs) and not self.any["wd"]
                           and not self.any["clip"] and not self.any["warmup"] and not self.any["trust"]
                           and one("beta1") is not None and one("beta2") is not None)
        self.betas = (one("beta1"), one("beta2"))
        # the optimiser's per-run factors that do not change from step to step (the same numbers
        # optim._apply_update would compute each step; fewer small ops in a step)
        self._views: dict[int, dict[str, torch.Tensor]] = {}  # (run_views)
        coupled = any(c.wd > 0 and c.optimizer != "adamw" for c in cfgs)
        self.optim_const = {
            "coupled_wd": torch.where(v["adamw"], 0.0, v["wd"]) if coupled else None,
            "1-beta1": 1 - v["beta1"], "1-beta2": 1 - v["beta2"], "all_adam": bool(v["adam"].all()),
            "-lr": -v["lr"], "adamw_decay": torch.where(v["adamw"], v["lr"] * v["wd"], 0.0),
        }

    def run_views(self, dim: int) -> dict[str, torch.Tensor]:
        """The optimiser's per-run settings [R] viewed as [R, 1, ...] of ``dim`` axes (made once per
        shape until runs leave: a view is cheap, but a step asks for a handful)."""
        got = self._views.get(dim)
        if got is None:
            shape = (len(self.cfgs), *([1] * (dim - 1)))
            c, v = self.optim_const, self.vec
            got = {name: x.view(shape) for name, x in (("beta1", v["beta1"]), ("beta2", v["beta2"]), ("adam", v["adam"]),
                                                        ("1-beta1", c["1-beta1"]), ("1-beta2", c["1-beta2"]),
                                                        ("-lr", c["-lr"]), ("adamw_decay", c["adamw_decay"]))}
            self._views[dim] = got
        return got

    def keep(self, sel: list[int], width: int | None = None) -> None:
        """Drop every run not in ``sel`` (finished runs leave the batch); with ``width``, the batch
        narrows to that many problem slots (at least the largest ``b_p`` left)."""
        ix = torch.as_tensor(sel, dtype=torch.long, device=self.vec["lr"].device)
        for name in ("params", "m1", "m2", "vec"):
            setattr(self, name, {k: v[ix] for k, v in getattr(self, name).items()})
        if width is not None:
            self.vec["b_mask"] = self.vec["b_mask"][:, :width]
        self.cfgs = [self.cfgs[i] for i in sel]
        self.streams = [self.streams[i] for i in sel]
        self.schedule = [self.schedule[i] for i in sel]
        self._flags()
