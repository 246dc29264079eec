"""K organism runs in one process (llm_runs.training.many): the same records as K single lean runs,
and the same records after a kill and a resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_helpers import interrupt_after, read_jsonl, strip_volatile  # noqa: E402

from isosim.errors import IsosimError  # noqa: E402
from llm_runs.organism import build as organism  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

EXACT = ("step", "rollouts", "tokens", "train_reward", "val_avg", "val_best", "val_worst", "response_len",
         "val_response_len")
CLOSE = ("entropy", "kl", "sampler_logprob_gap_mean")


@pytest.fixture(scope="module")
def quick_organism(tmp_path_factory):
    out = tmp_path_factory.mktemp("organism")
    organism.build(out, organism.OrganismSettings.for_scale("quick", sft_steps=40, threads=1), log=lambda m: None)
    return out


def _cfg(pool: Path, out: Path, seed: int, **over):
    from llm_runs.config import RunConfig

    base = dict(model=str(pool.parent / "model"), data=str(pool), out=str(out), n=2, b_p=8, budget=8 * 2 * 8,
                seed=seed, val_size=40, prompt_template="plain", instruction="", answer_fallback="last-number",
                temperature=1.0, max_new_tokens=12, sampler_batch_size=4096, micro_batch_size=4096,
                precision="fp32", eval_n=4, eval_k=2, eval_points=3, base_lr=3e-3, recipe="easy",
                sampler="lean", train_forward="lean", save_every=2)
    return RunConfig(**{**base, **over})


# four runs: two seeds, two recipes (KL + entropy bonus, and neither), temperatures 1 and 0.6,
# two training-set sizes
RUNS = [dict(seed=0), dict(seed=1, recipe="hard"), dict(seed=2, temperature=0.6, eval_temperature=0.6),
        dict(seed=3, max_train_problems=30)]


def _compare(single, many, min_rows=4):
    assert len(many) == len(single) >= min_rows
    for a, b in zip(single, many):
        assert {k: a[k] for k in EXACT} == {k: b[k] for k in EXACT}
        for k in CLOSE:
            if a[k] is None:
                assert b[k] is None, k
            else:
                assert b[k] == pytest.approx(a[k], rel=1e-3, abs=1e-5), k


def test_many_runs_give_the_single_runs_records(quick_organism, tmp_path):
    from llm_runs.training.many import ManyTrainer
    from llm_runs.training.train import GRPOTrainer

    pool = quick_organism / "pool.jsonl"
    single = [GRPOTrainer(_cfg(pool, tmp_path / f"single{i}", **r), log=lambda m: None).train()
              for i, r in enumerate(RUNS)]
    many = ManyTrainer([_cfg(pool, tmp_path / f"many{i}", **r) for i, r in enumerate(RUNS)], log=lambda m: None)
    rows = many.train()
    for a, b in zip(single, rows):
        _compare(a, b)
    assert rows[1][-1]["kl"] is None and rows[0][-1]["kl"] is not None
    # the folders are the single trainer's: it reads the finished runs as complete
    done = GRPOTrainer(_cfg(pool, tmp_path / "many0", **RUNS[0]), log=lambda m: None).train()
    assert strip_volatile(done) == strip_volatile(rows[0])


def test_runs_at_different_steps_advance_together(quick_organism, tmp_path):
    """A run paused part-way and a fresh one, resumed in one process: each gives its own records."""
    from llm_runs.training.many import ManyTrainer
    from llm_runs.training.train import GRPOTrainer

    pool = quick_organism / "pool.jsonl"
    ref = [GRPOTrainer(_cfg(pool, tmp_path / f"ref{i}", **r), log=lambda m: None).train() for i, r in
           enumerate(RUNS[:2])]
    GRPOTrainer(_cfg(pool, tmp_path / "m0", pause_at_rollouts=48, **RUNS[0]), log=lambda m: None).train()
    rows = ManyTrainer([_cfg(pool, tmp_path / f"m{i}", **r) for i, r in enumerate(RUNS[:2])],
                       log=lambda m: None).train()
    for a, b in zip(ref, rows):
        _compare(a, b)


def _write_configs(pool: Path, folder: Path) -> list[Path]:
    paths = []
    for i, r in enumerate(RUNS[:3]):
        cfg = _cfg(pool, folder / f"run{i}", budget=8 * 2 * 12, **r).to_dict()
        path = folder / f"run{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg))
        paths.append(path)
    return paths


def _argv(paths):
    return [a for p in paths for a in ("--config", str(p))]


def test_kill_and_resume_gives_the_same_records(quick_organism, tmp_path):
    pool = quick_organism / "pool.jsonl"
    # every run in a process of one thread, as the sweeps run: float sums depend on the thread count
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    ref = _write_configs(pool, tmp_path / "ref")
    run = [sys.executable, "-m", "llm_runs.training.many"]
    assert subprocess.run([*run, *_argv(ref)], cwd=ROOT, env=env, capture_output=True).returncode == 0
    paths = _write_configs(pool, tmp_path / "killed")
    proc = interrupt_after([*run, *_argv(paths)], tmp_path / "killed" / "run2" / "metrics.jsonl", 5, signal.SIGKILL,
                           cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    assert (tmp_path / "killed" / "run0" / "checkpoint" / "trainer_state.json").exists()
    res = subprocess.run([*run, *_argv(paths)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    for i in range(3):
        a = read_jsonl(tmp_path / "ref" / f"run{i}" / "records.jsonl")
        b = read_jsonl(tmp_path / "killed" / f"run{i}" / "records.jsonl")
        assert len(a) == len(b) >= 4
        assert strip_volatile(a) == strip_volatile(b)
        assert (strip_volatile(read_jsonl(tmp_path / "ref" / f"run{i}" / "metrics.jsonl"))
                == strip_volatile(read_jsonl(tmp_path / "killed" / f"run{i}" / "metrics.jsonl")))


def test_a_stop_signal_checkpoints_every_run(quick_organism, tmp_path):
    paths = _write_configs(pool := quick_organism / "pool.jsonl", tmp_path / "stopped")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = interrupt_after([sys.executable, "-m", "llm_runs.training.many", *_argv(paths)],
                           tmp_path / "stopped" / "run0" / "metrics.jsonl", 3, signal.SIGTERM, cwd=ROOT, env=env,
                           timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr.read().decode()[-2000:]
    steps = [json.loads((tmp_path / "stopped" / f"run{i}" / "checkpoint" / "trainer_state.json").read_text())["step"]
             for i in range(3)]
    assert min(steps) >= 3 and max(steps) < 12
    assert pool.exists()


def test_runs_that_cannot_share_a_process_are_refused(quick_organism, tmp_path):
    from llm_runs.training.many import main

    pool = quick_organism / "pool.jsonl"
    with pytest.raises(IsosimError, match="share these settings"):
        from llm_runs.training.many import check_group

        check_group([_cfg(pool, tmp_path / "a", 0), _cfg(pool, tmp_path / "b", 1, n=4)])
    with pytest.raises(IsosimError, match="sampler 'lean'"):
        check_group([_cfg(pool, tmp_path / "a", 0, sampler="hf")])
    with pytest.raises(IsosimError, match="same --out"):
        check_group([_cfg(pool, tmp_path / "a", 0), _cfg(pool, tmp_path / "a", 1)])
    with pytest.raises(IsosimError, match="allocation uniform"):
        check_group([_cfg(pool, tmp_path / "a", 0, allocation="band")])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_cfg(pool, tmp_path / "c", 0, micro_batch_size=4).to_dict()))
    assert main(["--config", str(path)]) == 2


def test_f8_groups_runs_of_equal_n():
    from llm_runs.organism.f8 import group_jobs

    jobs = [{"n": n, "seed": s} for n in (2, 4) for s in range(3)]
    groups = group_jobs(jobs, 2)
    assert [[(c["n"], c["seed"]) for c in g] for g in groups] == [[(2, 0), (2, 1)], [(2, 2)], [(4, 0), (4, 1)],
                                                                  [(4, 2)]]
    assert group_jobs(jobs, 1) == [[c] for c in jobs]


def test_f8_sweep_with_many_gives_the_same_records(quick_organism, tmp_path):
    """``f8 run --lean --many 2``: the runs of each n share a process; records as one process per run."""
    extra = json.dumps({"val_size": 20, "eval_n": 4, "eval_k": 2, "eval_points": 2, "save_every": 2})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

    def sweep(out, many):
        return subprocess.run([sys.executable, "-m", "llm_runs.organism.f8", "run", "--setting", "easy-64",
                               "--n", "2,4", "--seeds", "2", "--budget", "192", "--model",
                               str(quick_organism / "model"), "--out", str(out), "--jobs", "2", "--lean",
                               "--many", str(many), "--extra", extra], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)

    r1, r2 = sweep(tmp_path / "one", 1), sweep(tmp_path / "many", 2)
    assert r1.returncode == 0 and r2.returncode == 0, r1.stdout + r1.stderr + r2.stdout + r2.stderr
    assert "4 of 4 runs finished" in r2.stdout
    log = (tmp_path / "many" / "launch.log").read_text()
    assert log.count("== ") == 2  # two processes of two runs
    for run in ("n2_bp16_s0", "n2_bp16_s1", "n4_bp16_s0", "n4_bp16_s1"):
        a = read_jsonl(tmp_path / "one" / "easy-64" / run / "records.jsonl")
        b = read_jsonl(tmp_path / "many" / "easy-64" / run / "records.jsonl")
        _compare(a, b, min_rows=3)


def test_f8_many_needs_lean(tmp_path):
    res = subprocess.run([sys.executable, "-m", "llm_runs.organism.f8", "run", "--setting", "easy-64", "--model",
                          "x", "--out", str(tmp_path), "--many", "2"], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 2 and "--lean" in res.stderr and res.stderr.strip().count("\n") == 0


def _two_models(path: Path):
    """The quick organism and a perturbed copy (two runs' weights)."""
    from llm_runs.sampling import models

    tok = models.load_tokenizer(str(path))
    a, b = models.load_model(str(path)), models.load_model(str(path))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in b.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.02)
    return tok, [a, b], models.eos_ids(tok, a)


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_stacked_sampling_draws_what_each_run_draws(quick_organism, top_p):
    """Two models, prompt lists of different lengths, chunks that split groups (7 rows): each run's
    draws are its own lean sampler's."""
    from llm_runs.problems.data import build_prompt
    from llm_runs.sampling.lean import LeanSampler, LlamaParts
    from llm_runs.training.stacked import StackedParts, generate_many

    tok, mods, eos = _two_models(quick_organism / "model")
    rows = [json.loads(x) for x in (quick_organism / "pool.jsonl").read_text().splitlines()[:10]]
    prompts = [build_prompt(tok, r["problem"], "plain", "") for r in rows]
    lists, temps, seeds = [prompts[:6], prompts[6:10]], [1.0, 0.6], [3, 11]
    samplers = [LeanSampler(m, tok, eos, batch_size=7) for m in mods]
    sp = StackedParts([LlamaParts(m) for m in mods])
    many = generate_many(sp, samplers, lists, 3, temps, top_p, 12, seeds)
    for s, ps, t, seed, b in zip(samplers, lists, temps, seeds, many):
        a = s.generate(ps, 3, t, top_p, 12, seed=seed)
        assert b.prompt_ids == a.prompt_ids and b.texts == tok.batch_decode(b.completion_ids, skip_special_tokens=True)
        same = [x == y for x, y in zip(a.completion_ids, b.completion_ids)]
        assert sum(same) >= len(same) - 1
        for ok, la, lb in zip(same, a.logprobs, b.logprobs):
            if ok:
                assert max((abs(u - v) for u, v in zip(la, lb)), default=0.0) < 1e-4


def test_stacked_forward_matches_each_runs_lean_forward(quick_organism):
    from llm_runs.problems.data import build_prompt
    from llm_runs.sampling.lean import LeanSampler, LlamaParts
    from llm_runs.training.lean_forward import response_logprobs
    from llm_runs.training.stacked import StackedParts, response_logprobs_many

    tok, mods, eos = _two_models(quick_organism / "model")
    rows = [json.loads(x) for x in (quick_organism / "pool.jsonl").read_text().splitlines()[:9]]
    prompts = [build_prompt(tok, r["problem"], "plain", "") for r in rows]
    batches = [LeanSampler(m, tok, eos).generate(ps, 4, 1.0, 1.0, 12, seed=1)
               for m, ps in zip(mods, [prompts[:5], prompts[5:9]])]
    temps = [0.7, 1.0]
    sp = StackedParts([LlamaParts(m) for m in mods])
    out = response_logprobs_many(sp, sp.weights(), [b.prompt_ids for b in batches],
                                 [b.completion_ids for b in batches], tok.pad_token_id, temps, True, bucket_rows=8)
    singles, joint = [], 0.0
    for m, b, t, (lp2, ent2, ids2, mask2) in zip(mods, batches, temps, out):
        lp, ent, ids, mask = response_logprobs(LlamaParts(m), b.prompt_ids, b.completion_ids, tok.pad_token_id, t,
                                               True)
        assert torch.equal(ids, ids2) and torch.equal(mask, mask2)
        assert float(((lp - lp2).detach().abs() * mask).max()) < 1e-5
        assert float(((ent - ent2).detach().abs() * mask).max()) < 1e-5
        singles.append(((lp + ent) * mask).sum())
        joint = joint + ((lp2 + ent2) * mask2).sum()
    # the joint loss's gradient on each run's parameters is that run's own loss's gradient
    for m, one in zip(mods, singles):
        params = list(m.parameters())
        g1 = torch.autograd.grad(one, params, retain_graph=True)
        g2 = torch.autograd.grad(joint, params, retain_graph=True)
        for x, y in zip(g1, g2):
            assert float((x - y).abs().max()) <= 1e-4 * (float(x.abs().max()) + 1e-6)
