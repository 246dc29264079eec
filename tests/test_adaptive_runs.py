"""``isosim validate --adaptive`` on a tiny random Llama: the search runs, is killed and resumes
from its decision log with the same decisions; bad input is one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.llm

ROOT = Path(__file__).resolve().parents[1]
SETS = ["val_size=4", "eval_n=2", "eval_k=2", "max_new_tokens=6", "eval_points=6", "save_every=100", "lr=1e-3",
        "micro_batch_size=32", "warmup_steps=0", "answer_fallback=last-number"]


@pytest.fixture(scope="module")
def assets(tiny_assets):
    out = tiny_assets("adaptive", 24)
    out["env"] = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MPLBACKEND": "Agg",
                  "ISOSIM_CACHE": str(out["root"] / "cache"), "HOME": str(out["root"]), "HF_HUB_OFFLINE": "1",
                  "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    return out


def args(assets, out, *extra, budget=256):
    a = ["validate", "--model", assets["model"], "--data", assets["data"], "--budget", budget, "--preset", "easy",
         "--quick", "--n", "2,4", "--b-p", 4, "--min-steps", 4, "--out", out, "--adaptive", *extra]
    for s in SETS:
        a += ["--set", s]
    return [str(x) for x in a]


def isosim(assets, *a, **kw):
    return subprocess.run([sys.executable, "-c", "import cli; cli.main()", *a], capture_output=True, text=True,
                          cwd=ROOT, env=assets["env"], timeout=600, **kw)


def test_adaptive_search_is_killed_and_resumes_its_decisions(assets):
    root = assets["root"]
    ref = root / "ref"
    res = isosim(assets, *args(assets, ref))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    result = json.loads((ref / "adaptive" / "result.json").read_text())
    ref_dec = json.loads((ref / "adaptive" / "decisions.json").read_text())
    assert result["chosen"] in (2, 4) and 0 <= result["overhead"] <= 1.0
    assert ref_dec[0]["event"] == "start" and ref_dec[-1]["event"] == "done"
    assert (ref / "adaptive" / "adaptive.png").stat().st_size > 1000
    chosen_rows = [json.loads(x) for x in (Path(result["run"]) / "records.jsonl").read_text().splitlines()]
    assert chosen_rows[-1]["rollouts"] == result["final"]["rollouts"] > 256 * 0.9  # extended to the budget

    # the same search, killed once its log holds two rung decisions, then rerun
    out = root / "killed"
    proc = subprocess.Popen([sys.executable, "-c", "import cli; cli.main()", *args(assets, out)], cwd=ROOT,
                            env=assets["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    dec = out / "adaptive" / "decisions.json"
    deadline = time.time() + 400
    try:
        while time.time() < deadline and proc.poll() is None:
            if dec.is_file() and sum(d["event"] == "rung" for d in json.loads(dec.read_text() or "[]")) >= 2:
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    partial = json.loads(dec.read_text())
    assert partial[-1]["event"] != "done", "the kill came after the search had finished"
    res = isosim(assets, *args(assets, out))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "resuming after" in res.stdout
    assert json.loads(dec.read_text()) == ref_dec  # the same decisions, in the same order
    # a rerun of a finished search decides nothing new
    res = isosim(assets, *args(assets, out))
    assert res.returncode == 0 and json.loads(dec.read_text()) == ref_dec


@pytest.mark.parametrize("extra,budget,needle", [
    ([], 0, "--budget must be a positive"),
    ([], -64, "--budget must be a positive"),
    (["--seeds", "2"], 256, "one seed per n"),
    (["--search", "widest"], 256, "--search must be adaptive, lines or sbi"),
])
def test_adaptive_bad_input_one_line_exit_2(assets, extra, budget, needle):
    res = isosim(assets, *args(assets, assets["root"] / "bad", *extra, budget=budget))
    assert res.returncode == 2, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.stderr


def test_adaptive_refuses_a_decision_log_of_another_search(assets):
    out = assets["root"] / "other"
    (out / "adaptive").mkdir(parents=True)
    (out / "adaptive" / "decisions.json").write_text(json.dumps([{"event": "start", "n": [8], "settings": {
        "budget": 999.0, "grid": [8], "start": [8]}}]))
    res = isosim(assets, *args(assets, out))
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "other settings" in lines[0], res.stderr


def test_search_lines_runs_every_n_to_a_quarter_then_the_two_best_to_half(assets):
    out = assets["root"] / "lines"
    res = isosim(assets, *args(assets, out, "--search", "lines"))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    dec = json.loads((out / "adaptive" / "decisions.json").read_text())
    assert dec[0]["settings"]["policy"] == "lines" and dec[0]["n"] == [2, 4]
    rungs = [d for d in dec if d["event"] == "rung"]
    assert [d["rung"] for d in rungs] == [64.0, 128.0]  # C/4 and C/2 of 256 rollouts
    assert all(d["active"] == [2, 4] for d in rungs)  # two n: both are among the two best lines
    result = json.loads((out / "adaptive" / "result.json").read_text())
    assert result["chosen"] in (2, 4) and dec[-1]["event"] == "done" and result["settings"]["policy"] == "lines"
    # the same folder under the other rule is another search: refused, one line, exit 2
    res = isosim(assets, *args(assets, out))
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "search" in lines[0], res.stderr
    # --search without --adaptive
    a = [x for x in args(assets, assets["root"] / "lines_bad", "--search", "lines") if x != "--adaptive"]
    res = isosim(assets, *a)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "add --adaptive" in lines[0], res.stderr


def test_search_sbi_reads_every_n_at_each_rung_and_logs_the_predictions(assets):
    out = assets["root"] / "sbi"
    res = isosim(assets, *args(assets, out, "--search", "sbi"))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    dec = json.loads((out / "adaptive" / "decisions.json").read_text())
    assert dec[0]["settings"]["policy"] == "sbi" and dec[0]["n"] == [2, 4] and dec[0]["settings"]["b_p"] == 4
    rung = [d for d in dec if d["event"] == "rung"]
    assert len(rung) == 1 and rung[0]["rung"] == 8.0 and rung[0]["active"] == [2, 4]  # C/32: one of two n stops
    assert set(rung[0]["predicted"]) == set(rung[0]["expected_regret"]) == {"2", "4"}
    assert [d["event"] for d in dec] == ["start", "rung", "stop", "choose", "done"]
    result = json.loads((out / "adaptive" / "result.json").read_text())
    assert result["chosen"] == rung[0]["leader"] and result["settings"]["policy"] == "sbi"
    # the same folder under another rule is another search: refused, one line, exit 2
    res = isosim(assets, *args(assets, out, "--search", "lines"))
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "search" in lines[0], res.stderr
