"""How the engine spreads a call's runs: batches by width where a padded problem slot is dear, a batch
that narrows as its widest runs leave, and a helper process on a second core (``workers=2``). None of
it may change a run's records: compared here with the same runs one at a time and with one worker, on
this machine in this run (no committed numbers)."""

from __future__ import annotations

import pandas as pd
import pytest

from isosim.errors import IsosimError
from isosim.sim import workers
from isosim.sim.config import SimConfig
from isosim.sim.engine import batch, simulate

METRICS = ["step", "rollouts", "train_reward", "val_avg", "val_best", "val_worst", "entropy", "kl"]


def sweep(memorize: float = 1.0) -> list[SimConfig]:
    """A small sweep like recommend's: dense memorisation features, two widths, runs of unequal length
    (the long ones outlive the widest), two seeds, and a second batch key (an allocation rule)."""
    base = SimConfig(n_train=48, n_val=32, budget=6000.0, kl=1.0, entropy=0.01, memorize=memorize, mem_dim=16,
                     optimizer="adamw", lr=0.05, wd=0.01, eval_points=6)
    cfgs = [base.replace(n=n, b_p=b_p, seed=s) for n in (2, 8, 80) for b_p in (4, 16) for s in (0, 1)]
    return cfgs + [base.replace(n=8, b_p=8, seed=0, allocation="variance")]


def test_runs_of_two_widths_batch_apart_only_with_dense_features():
    cfgs = sweep()
    split = batch._by_width(("k",), cfgs)
    assert sorted(split) == sorted({("k", c.b_p) for c in cfgs}) and sum(map(len, split.values())) == len(cfgs)
    plain = sweep(memorize=0.0)
    assert batch._by_width(("k",), plain) == {("k",): plain}


@pytest.fixture
def eager(monkeypatch):
    """The helper takes work even for a small call (its start-up counted as free)."""
    monkeypatch.setattr(workers, "STARTUP_S", 0.0)


def test_a_sweep_gives_each_run_what_it_gives_alone(eager):
    """Batched by width, narrowing as runs leave, on two cores: each run's records are those of the run
    simulated alone, exactly on the steps and rollouts and to round-off elsewhere (an evaluation of
    several runs at once is one matrix product whose blocking depends on how many)."""
    cfgs = sweep()
    together = simulate(cfgs, workers=2)
    alone = pd.concat([simulate([c]) for c in cfgs], ignore_index=True)
    pd.testing.assert_frame_equal(together[["run_id", "step", "rollouts"]], alone[["run_id", "step", "rollouts"]],
                                  check_exact=True)
    pd.testing.assert_frame_equal(together[["run_id"] + METRICS], alone[["run_id"] + METRICS],
                                  check_exact=False, rtol=1e-9, atol=1e-12)


def test_two_workers_give_the_records_of_one_bit_for_bit(eager):
    """The helper process computes its batches with the same code and generators: the records of a
    call are the same numbers with one worker or two, and the progress callback sees every step's
    rollouts either way."""
    cfgs = sweep()
    got: dict[int, list[float]] = {1: [], 2: []}
    one = simulate(cfgs, progress=got[1].append)
    two = simulate(cfgs, workers=2, progress=got[2].append)
    pd.testing.assert_frame_equal(one, two, check_exact=True)
    assert sorted(got[1]) == sorted(got[2]) and sum(got[2]) > 0
    assert workers.split(list(batch._by_width(("k",), cfgs[:-1]).values()) + [cfgs[-1:]], warm=True)[1]
    assert workers.running()  # it took its share, and is kept for the next call


def test_a_helper_that_died_is_replaced_and_a_bad_count_refused(eager):
    cfgs = sweep()[:4]
    first = simulate(cfgs, workers=2)
    workers.helper()[0].proc.kill()
    workers.helper()[0].proc.wait()
    pd.testing.assert_frame_equal(simulate(cfgs, workers=2), first, check_exact=True)
    for bad in (0, 1.5):
        with pytest.raises(IsosimError, match="workers"):
            simulate(cfgs, workers=bad)


def test_the_helper_reports_an_engine_error_in_one_line(eager):
    """A batch that fails in the helper raises IsosimError in the caller (not a hang, not a traceback
    from another process), and the helper goes on serving."""
    import torch

    cfgs = sweep()
    h = workers.helper()[0]
    wait = h.start([cfgs[:2]], "no-such-device", torch.float64, 1, None)
    with pytest.raises(IsosimError, match="in the helper process") as exc:
        wait()
    assert "\n" not in str(exc.value) and workers.running() and workers.helper()[0] is h
    pd.testing.assert_frame_equal(simulate(cfgs, workers=2), simulate(cfgs), check_exact=True)


def test_the_split_puts_the_longest_batch_first_and_balances():
    cfgs = sweep()
    batches = list(batch._by_width(("k",), cfgs[:-1]).values()) + [[cfgs[-1]]]
    mine, theirs = workers.split(batches, warm=True)
    assert sorted(mine + theirs) == list(range(len(batches)))
    costliest = max(range(len(batches)), key=lambda i: workers.batch_cost(batches[i]))
    assert costliest in mine
    assert workers.split(batches[:1], warm=False) == ([0], [])


def test_an_interrupted_call_ends_the_helper_at_once(eager, monkeypatch):
    """Ctrl-C (or an error) while this process steps its batches ends the helper then and there: the
    caller does not wait for the helper's half, and the next call starts a fresh helper."""
    cfgs = sweep()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(batch, "run_batches", interrupted)
    with pytest.raises(KeyboardInterrupt):
        simulate(cfgs, workers=2)
    assert not workers.running()
    monkeypatch.undo()
    monkeypatch.setattr(workers, "STARTUP_S", 0.0)
    pd.testing.assert_frame_equal(simulate(cfgs, workers=2), simulate(cfgs), check_exact=True)


def test_without_a_helper_this_process_steps_every_batch(eager, monkeypatch):
    """A helper that cannot start, or dies before it answers, costs time, not records: this process
    steps its batches too."""
    cfgs = sweep()
    want = simulate(cfgs)
    start = workers.Helper.start

    def dies(self, *args, **kwargs):
        wait = start(self, *args, **kwargs)
        self.proc.kill()
        return wait

    monkeypatch.setattr(workers.Helper, "start", dies)
    pd.testing.assert_frame_equal(simulate(cfgs, workers=2), want, check_exact=True)
    assert not workers.running()
    monkeypatch.undo()
    monkeypatch.setattr(workers, "STARTUP_S", 0.0)

    def no_process(*args, **kwargs):
        raise OSError("no such file")

    monkeypatch.setattr(workers.subprocess, "Popen", no_process)
    pd.testing.assert_frame_equal(simulate(cfgs, workers=2), want, check_exact=True)
    assert not workers.running()


def test_two_threads_calling_at_once_share_the_helper_safely(eager):
    """One helper serves one call at a time: a second thread's call while it is busy steps its batches
    itself. Both get their own records."""
    from concurrent.futures import ThreadPoolExecutor

    cfgs = sweep()
    other = [c.replace(seed=c.seed + 10) for c in cfgs]
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda cs: simulate(cs, workers=2), [cfgs, other]))
    pd.testing.assert_frame_equal(got[0], simulate(cfgs), check_exact=True)
    pd.testing.assert_frame_equal(got[1], simulate(other), check_exact=True)


def test_calls_beside_a_warm_helper_answer_what_they_answer_here(eager):
    """``workers.beside`` sends the second half of a list of calls to a helper a simulation left running
    (never starting one for it); the values come back in order, an error there is one line, and a
    sweep's frontier read through it is the read made here."""
    import json
    import os

    from isosim.files import jsonable
    from isosim.predict import choice

    df = simulate(sweep(), workers=2)
    assert workers.running()
    pids = workers.beside("os:getpid", [(), (), ()])
    assert pids[0] == os.getpid() and pids[1] == pids[2] != os.getpid()  # the last two ran there
    assert workers.beside("os:getpid", [()]) == [os.getpid()]  # one call alone: here, nothing beside it
    with pytest.raises(IsosimError, match=r"^math:sqrt \(in the helper process\): ValueError") as exc:
        workers.beside("math:sqrt", [(4.0,), (-1.0,)])
    assert "\n" not in str(exc.value) and workers.running()
    there = choice.read_grid(df, "val_avg", 20)
    workers.close()
    assert workers.beside("os:getpid", [(), ()]) == [os.getpid()] * 2 and not workers.running()
    here = choice.read_grid(df, "val_avg", 20)
    assert json.dumps(jsonable(there), sort_keys=True) == json.dumps(jsonable(here), sort_keys=True)


def test_a_helper_told_the_caller_is_done_ends_without_being_waited_for(eager):
    """At the caller's exit the helper is not waited for: it reads the end of its input and ends by itself."""
    import time

    simulate(sweep()[:4], workers=2)
    proc = workers.helper()[0].proc
    workers.close(wait=False)
    assert not workers.running()
    deadline = time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.returncode == 0
