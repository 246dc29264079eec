"""Scheduling: the loop that drives a batch of runs advancing together (their state is
:class:`state._Batch`): it draws each chunk of steps, steps, records evaluations and lets
finished runs leave; and :func:`simulate`."""

from __future__ import annotations

import contextlib
import dataclasses
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from isosim.errors import IsosimError
from isosim.sim.config import SimConfig
from isosim.sim.engine import allocated
from isosim.sim.engine.evaluation import (
    all_logits,
    evaluate,
    evaluate_closed,
    sampled_metrics,
)
from isosim.sim.engine.grpo import _closed_step, _general_step
from isosim.sim.engine.optim import _apply_update
from isosim.sim.engine.policies import LinearFeatures, feature_scale, init_params
from isosim.sim.engine.state import _Batch
from isosim.sim.engine.streams import DIRECT_MAX, correct_only
from isosim.sim.problems import build, stack

CHUNK = 64  # most steps of problem order and uniforms drawn per refill
CHUNK_ROWS = 1 << 14  # ... and at most about this many (run, problem) rows per refill (cache-sized gathers)


def _run_batch(cfgs: list[SimConfig], device, dtype, progress) -> list[dict]:
    """Run configurations that share a batch key together; return their record rows."""
    pop_keys = list(dict.fromkeys(c.population_key for c in cfgs))
    mem = any(c.dense_features for c in cfgs)
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
    # (without autograd the batch runs in inference mode, where no_grad has nothing to do but cost a few us a step)
    no_grad = torch.no_grad if autograd else contextlib.nullcontext
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
    alloc = cfgs[0].allocation != "uniform"  # (part of the batch key: every run's rule is, or none)
    if alloc:
        allocated.start(b, Bmax)
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
            if alloc:  # the rules plan each step from the estimates: only candidates are drawn ahead
                allocated.refill(b, chunk_len)
            else:
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
        if alloc:
            idx, u, flat = allocated.plan_step(b, s, not all_co, P_all)
            here = {name: torch.nn.functional.embedding(flat, table) for name, table in tables.items()}
            if b.any_reg and not closed:
                here["neg_kl_logpi0"] = here["logpi0"] * -b.const["kl"]
        else:
            idx, flat = sched[s], flat_c[s]
            u = u_all[s] if u_all is not None else None
            here = {k: x[s] for k, x in chunk.items()}

        if closed:  # the linear policy in closed form: only the draws touch every response
            with no_grad():
                grads, z, counts, pi = _closed_step(b, here, u, has_len)
        else:
            grads, z, counts, pi = _general_step(b, here, u, idx, flat, pop, linear, U_flat, autograd)
        with no_grad():
            if alloc:
                allocated.observe(b, b.last_m)
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
            if len(alive) < len(b.cfgs) and alloc:
                b.keep(alive)
            elif len(alive) < len(b.cfgs):
                # the batch narrows to the widest b_p still going (its padding slots cost time, not results)
                Bmax = max((b.cfgs[r].b_p for r in alive), default=Bmax)
                ix = torch.as_tensor(alive, dtype=torch.long, device=device)
                sched = sched[:, ix, :Bmax]
                flat_c = flat_c[:, ix, :Bmax]
                u_all = u_all[:, ix, :Bmax] if u_all is not None else None
                chunk = {k: x[:, ix, :Bmax] for k, x in chunk.items()}
                b.keep(alive, Bmax)
    return rows


def _by_width(key: tuple, runs: list[SimConfig]) -> dict[tuple, list[SimConfig]]:
    """The runs of one batch key, split by ``b_p`` where a padded problem slot is dear: with dense
    memorisation features every slot of a step gathers and multiplies its ``K x mem_dim`` rows, so
    a run of ``b_p`` 32 beside one of 128 would pay for 128. Elsewhere (a slot costs a few numbers)
    one batch of every width keeps the batched steps few. A run's records do not depend on its batch."""
    if not any(c.dense_features for c in runs):
        return {key: runs}
    out: dict[tuple, list[SimConfig]] = defaultdict(list)
    for c in runs:
        out[(*key, c.b_p)].append(c)
    return out


def run_batches(batches: list[list[SimConfig]], device, dtype, threads: int | None,
                progress: Callable[[float], None] | None) -> list[dict]:
    """Step the batches one after another; their record rows."""
    rows: list[dict] = []
    before = torch.get_num_threads()
    if threads is not None:  # small tensors: extra threads mostly spin (and collapse on a busy machine)
        torch.set_num_threads(threads)
    try:
        for batch in batches:
            # no autograd anywhere but in the mlp policy: inference mode skips autograd's bookkeeping
            with torch.inference_mode(batch[0].policy != "mlp"):
                rows.extend(_run_batch(batch, torch.device(device), dtype, progress))
    finally:
        torch.set_num_threads(before)
    return rows


def _with_helper(batches: list[list[SimConfig]], device, dtype, threads: int | None,
                 progress: Callable[[float], None] | None) -> list[dict]:
    """:func:`run_batches` on two cores: the helper process steps some batches while this one steps the rest."""
    import threading

    from isosim.sim import workers

    mine, theirs = workers.split(batches, workers.running())
    if not theirs:
        return run_batches(batches, device, dtype, threads, progress)
    if progress is not None:  # the caller's callback sees one thread at a time
        lock, shown = threading.Lock(), progress

        def progress(rollouts: float) -> None:
            with lock:
                shown(rollouts)

    theirs_batches = [batches[i] for i in theirs]
    # (without a helper, or after it stopped, this process steps its batches too; simulate sorts the rows)
    return workers.share(lambda: workers.helper()[0].start(theirs_batches, str(device), dtype, threads, progress),
                         lambda: run_batches([batches[i] for i in mine], device, dtype, threads, progress),
                         lambda: run_batches(theirs_batches, device, dtype, threads, progress))


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
    workers: int = 1,
) -> pd.DataFrame:
    """Run simulated GRPO for every configuration; return the records table.

    Runs that share a ``batch_key`` advance together (at most ``max_batch`` at once). The result
    of each run depends only on its own configuration, not on the others in the call.
    ``progress`` receives the rollouts spent at each step (increments; from one thread at a time).
    ``threads`` caps torch's CPU threads while simulating (None: leave torch's setting alone).
    ``workers`` 2 (on the CPU) steps some batches in a helper process on another core
    (:mod:`isosim.sim.workers`) while this one steps the others: a batch's computation is
    its own, so the records are the same as with one worker.
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
    groups = {key: group for k, runs in groups.items() for key, group in _by_width(k, runs).items()}
    if int(workers) != workers or workers < 1:
        raise IsosimError(f"simulate: workers must be an integer >= 1 (got {workers!r})")
    batches = [group[i: i + (max_batch or len(group))] for group in groups.values()
               for i in range(0, len(group), max_batch or len(group))]
    if workers > 1 and len(batches) > 1 and str(device).startswith("cpu"):
        rows = _with_helper(batches, device, dtype, threads, progress)
    else:
        rows = run_batches(batches, device, dtype, threads, progress)
    df = pd.DataFrame(rows)
    order = {rid: i for i, rid in enumerate(ids)}  # runs in the order given, each by step
    by = np.lexsort((df["step"].to_numpy(), np.fromiter((order[r] for r in df["run_id"]), int, len(df))))
    return df.take(by).reset_index(drop=True)
