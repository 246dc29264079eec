"""Scheduling: a batch of runs that advance together (:class:`_Batch`), the loop that draws each
chunk of steps, steps, records evaluations and lets finished runs leave, and :func:`simulate`."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from isosim import advantage as adv
from isosim.config import SimConfig
from isosim.engine.evaluation import (
    all_logits,
    eval_steps,
    evaluate,
    evaluate_closed,
    sampled_metrics,
)
from isosim.engine.grpo import _closed_step, _general_step
from isosim.engine.optim import _apply_update
from isosim.engine.policies import LinearFeatures, feature_scale, init_params
from isosim.engine.streams import DIRECT_MAX, RunStreams, correct_only
from isosim.errors import IsosimError
from isosim.problems import build, stack

CHUNK = 64  # most steps of problem order and uniforms drawn per refill
CHUNK_ROWS = 1 << 14  # ... and at most about this many (run, problem) rows per refill (cache-sized gathers)


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
        self.big = [r for r, c in enumerate(cfgs) if c.n > DIRECT_MAX]
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
        self.masked = len({c.b_p for c in cfgs}) > 1  # some runs use fewer batch slots than others
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

    def keep(self, sel: list[int]) -> None:
        """Drop every run not in ``sel`` (finished runs leave the batch)."""
        ix = torch.as_tensor(sel, dtype=torch.long, device=self.vec["lr"].device)
        for name in ("params", "m1", "m2", "vec"):
            setattr(self, name, {k: v[ix] for k, v in getattr(self, name).items()})
        self.cfgs = [self.cfgs[i] for i in sel]
        self.streams = [self.streams[i] for i in sel]
        self.schedule = [self.schedule[i] for i in sel]
        self._flags()


def _run_batch(cfgs: list[SimConfig], device, dtype, progress) -> list[dict]:
    """Run configurations that share a batch key together; return their record rows."""
    pop_keys = list(dict.fromkeys(c.population_key for c in cfgs))
    mem = any(c.memorize > 0 and c.policy != "tabular" for c in cfgs)
    pop = stack([build(next(c for c in cfgs if c.population_key == key), device=device, dtype=dtype, memorize=mem)
                 for key in pop_keys])
    key_index = {key: i for i, key in enumerate(pop_keys)}
    Bmax = max(c.b_p for c in cfgs)
    logpi0_all = torch.log_softmax(pop.z0, -1)  # [S, P, K]

    scale, tab_scale = feature_scale(cfgs, pop, device, dtype)
    # keep only feature dimensions some run uses (a zero-strength part costs time, not results)
    used = (scale != 0).any(0)
    used[pop.dims["skill"]] |= not bool(used.any())
    cols = used.nonzero().squeeze(-1)
    pop = dataclasses.replace(pop, U=pop.U[..., cols].contiguous())
    P_all = pop.U.shape[1]
    has_len = bool(pop.length.isfinite().any())
    U_flat = pop.U.view(-1, pop.U.shape[-2] * pop.U.shape[-1])  # [S * P, K * D]: one row per problem
    # gathered per chunk, by row. The base log-probs serve as base logits too (a softmax does not
    # see a per-problem constant), which saves gathering z0 as well
    tables = {"correct": pop.correct, "logpi0": logpi0_all}  # (the closed form may drop both below)
    if has_len:
        tables["length"] = pop.length.nan_to_num(0.0)
    tables = {name: x.reshape(-1, x.shape[-1]) for name, x in tables.items()}
    scale = scale[:, cols]
    autograd = cfgs[0].policy == "mlp"
    linear = None
    all_co = all(correct_only(c) for c in cfgs)  # every run draws its correct draws only
    if not autograd and cfgs[0].policy == "linear":  # (tabular runs have no theta)
        closed_ok = not any(c.tabular > 0 for c in cfgs)  # nothing but the features in the logits
        linear = LinearFeatures(pop.U, int((cols < pop.clusters).sum()),
                                *((pop.correct, logpi0_all) if closed_ok else ()))
        tables.update(linear.tables)
        if linear.closed and not any(c.trust_region is not None for c in cfgs):
            del tables["logpi0"]  # (the trust region compares logits)
            if all_co:  # draws from the pass rate alone: no per-response counts
                del tables["correct"], tables["cdf_cor"], tables["cdf_inc"]
    closed = linear is not None and linear.closed
    pop_idx = torch.as_tensor([key_index[c.population_key] for c in cfgs], dtype=torch.long, device=device)
    b = _Batch(cfgs, pop, pop_idx, scale, tab_scale, init_params(cfgs, pop, device, dtype), Bmax, device, dtype)
    settings = {c.run_id: {"run_id": c.run_id, **c.settings()} for c in cfgs}
    rows: list[dict] = []

    def record(sel: list[int], step: int) -> None:
        if not sel:
            return
        ix = torch.as_tensor(sel, device=device)
        v = b.vec
        with torch.no_grad():
            sub = {k: p[ix] for k, p in b.params.items()}
            if closed:
                metrics, p = evaluate_closed(sub["theta"] * v["scale"][ix], linear, pop, v["pop_idx"][ix], cfgs[0].k)
            else:
                z_all = all_logits(sub, v["scale"][ix], v["tab_scale"][ix], pop, v["pop_idx"][ix], linear)
                metrics, p = evaluate(z_all, pop, v["pop_idx"][ix], logpi0_all, cfgs[0].k)
        spent = v["rollouts"][ix].tolist()
        tokens = v["tokens"][ix].tolist() if has_len else [float("nan")] * len(sel)
        p_val = p[:, pop.n_train:].cpu().numpy()
        for j, r in enumerate(sel):
            cfg = b.cfgs[r]
            row = {**settings[cfg.run_id], "step": step, "rollouts": spent[j], "k": cfg.k,
                   "tokens": tokens[j] if cfg.mean_len is not None else float("nan")}  # (whatever the batch)
            row.update({key: float(val[j]) for key, val in metrics.items()})
            if cfg.eval_samples:
                row.update(sampled_metrics(p_val[j], max(cfg.eval_samples, cfg.k), cfg.k, b.streams[r].evals))
            rows.append(row)

    record(list(range(len(cfgs))), 0)
    for sch in b.schedule:
        sch.pop(0)

    t = s = chunk_len = 0  # step; step within the current chunk of draws; that chunk's length
    while b.cfgs:
        v = b.vec
        # ---- every chunk of steps: draw the next problem batches and rollout uniforms -------
        # (the streams do not depend on the chunk length, so neither do the results)
        if s == chunk_len:
            R = len(b.cfgs)
            chunk_len = max(1, min(CHUNK, CHUNK_ROWS // (R * Bmax)))
            s = 0
            idx_np = np.zeros((R, chunk_len, Bmax), dtype=np.int64)
            n_max = max((c.n for c in b.cfgs if c.n <= DIRECT_MAX), default=0)
            u_np = np.full((R, chunk_len, Bmax, n_max), 2.0) if n_max else None
            for r, (c, st) in enumerate(zip(b.cfgs, b.streams)):
                idx_np[r, :, : c.b_p] = st.problems(chunk_len)
                if c.n <= DIRECT_MAX:
                    u_np[r, :, : c.b_p, : c.n] = st.uniforms(chunk_len)
            if n_max and not all_co:
                u_np.sort(axis=-1)  # each group's uniforms in order (the padding 2.0 stays last)
            # step-major layout [CHUNK, R, Bmax, ...]: one step's slice is contiguous
            sched = torch.as_tensor(idx_np, device=device).transpose(0, 1).contiguous()
            u_all = (torch.as_tensor(u_np, dtype=dtype, device=device).transpose(0, 1).contiguous()
                     if u_np is not None else None)
            # gather the chunk's problem tensors once
            flat_c = v["pop_idx"][None, :, None] * P_all + sched  # rows of the flattened tables, [CHUNK, R, B]
            chunk = {name: torch.nn.functional.embedding(flat_c, table)  # a row gather, faster than index_select
                     for name, table in tables.items()}
            if b.any_reg and not closed:  # the KL pull's fixed part, once per chunk
                chunk["neg_kl_logpi0"] = chunk["logpi0"] * -b.const["kl"]
        idx = sched[s]
        u = u_all[s] if u_all is not None else None
        here = {k: x[s] for k, x in chunk.items()}

        if closed:  # the linear policy in closed form: only the draws touch every response
            with torch.no_grad():
                grads, z, counts, pi = _closed_step(b, here, u, has_len)
        else:
            grads, z, counts, pi = _general_step(b, here, u, idx, flat_c[s], pop, linear, U_flat, autograd)
        with torch.no_grad():
            _apply_update(b, grads, z, pop, idx, t, here.get("logpi0"))
            # ---- accounting -------------------------------------------------------------------
            v["rollouts"] += b.const["spent"]
            if has_len and counts is not None:  # (None: no run left with a length model)
                L = here["length"]
                extra_draws = (v["n_roll"] - v["n"])[:, None]
                v["tokens"] += (counts * L).sum((-1, -2)) + ((pi * L).sum(-1) * extra_draws * v["b_mask"]).sum(-1)
        t += 1
        s += 1
        if progress is not None:
            progress(b.spent_total)
        # ---- evaluation points; finished runs leave the batch ---------------------------------
        due = [r for r, sch in enumerate(b.schedule) if sch[0] == t]
        if due:
            record(due, t)
            for r in due:
                b.schedule[r].pop(0)
            alive = [r for r, sch in enumerate(b.schedule) if sch]
            if len(alive) < len(b.cfgs):
                ix = torch.as_tensor(alive, dtype=torch.long, device=device)
                sched = sched[:, ix]
                flat_c = flat_c[:, ix]
                u_all = u_all[:, ix] if u_all is not None else None
                chunk = {k: x[:, ix] for k, x in chunk.items()}
                b.keep(alive)
    return rows


# ----------------------------------------------------------------------------------------
# Public entry point
# ----------------------------------------------------------------------------------------
def simulate(
    configs: Sequence[SimConfig] | SimConfig,
    *,
    device: str = "cpu",
    dtype: torch.dtype = torch.float64,
    progress: Callable[[float], None] | None = None,
    max_batch: int | None = None,
    threads: int | None = 1,
) -> pd.DataFrame:
    """Run simulated GRPO for every configuration; return the records table.

    Runs that share a ``batch_key`` advance together (at most ``max_batch`` at once). The result
    of each run depends only on its own configuration, not on the others in the call.
    ``progress`` receives the rollouts spent at each step (increments). ``threads`` caps torch's
    CPU threads while simulating (None: leave torch's setting alone).
    """
    if isinstance(configs, SimConfig):
        configs = [configs]
    configs = list(configs)
    if not configs:
        raise IsosimError("simulate: no configurations given")
    for c in configs:
        if not isinstance(c, SimConfig):
            raise IsosimError(f"simulate: expected SimConfig, got {type(c).__name__}")
    ids = [c.run_id for c in configs]
    if len(set(ids)) != len(ids):
        raise IsosimError("simulate: two configurations are identical (same run_id)")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise IsosimError(f"device {device!r} requested but CUDA is not available")
    groups: dict[tuple, list[SimConfig]] = defaultdict(list)
    for c in configs:
        groups[c.batch_key].append(c)
    rows: list[dict] = []
    before = torch.get_num_threads()
    if threads is not None:  # small tensors: extra threads mostly spin (and collapse on a busy machine)
        torch.set_num_threads(threads)
    try:
        for group in groups.values():
            size = max_batch or len(group)
            for i in range(0, len(group), size):
                # no autograd anywhere but in the mlp policy: inference mode skips autograd's bookkeeping
                with torch.inference_mode(group[0].policy != "mlp"):
                    rows.extend(_run_batch(group[i: i + size], torch.device(device), dtype, progress))
    finally:
        torch.set_num_threads(before)
    df = pd.DataFrame(rows)
    order = {rid: i for i, rid in enumerate(ids)}  # runs in the order given, each by step
    by = np.lexsort((df["step"].to_numpy(), np.fromiter((order[r] for r in df["run_id"]), int, len(df))))
    return df.take(by).reset_index(drop=True)
