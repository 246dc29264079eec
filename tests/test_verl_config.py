"""The verl overrides ``isosim plan --for verl`` writes, composed with verl's own trainer config.

verl's ``python -m verl.trainer.main_ppo`` composes ``verl/trainer/config/ppo_trainer.yaml`` with
Hydra and applies the command line's ``key=value`` overrides; the package ships the composed result
as ``_generated_ppo_trainer.yaml`` (verl regenerates it from the Hydra composition and checks that
they agree). Here the plan's overrides are merged into that YAML with OmegaConf in struct mode, as
Hydra merges them: a key verl does not have fails, every interpolation of verl's config must
resolve, each override must land with its type, and verl 0.9.1's batch checks
(:func:`isosim.integrations.plan.check_verl`) and its micro-batch rule (exactly one of
``*_micro_batch_size`` and ``*_micro_batch_size_per_gpu`` set, ``verl/utils/config.py``) hold on
the composed values, defaults included.

verl's Python package cannot be imported without its GPU stack (ray, tensordict, vLLM), so only its
configuration is used: CI installs ``verl==0.9.1`` with ``--no-deps`` (``.ci/run``) and finds its
YAML without importing it; OmegaConf is a dev dependency. Without verl the tests skip, and
tests/test_plan.py still checks every override against verl 0.9.1's key list.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from cli_helpers import run

ROOT = Path(__file__).resolve().parents[1]
VERL_VERSION = "0.9.1"
KEYS_FIXTURE = ROOT / "tests" / "fixtures" / f"verl_{VERL_VERSION}_ppo_trainer_keys.txt"
MICRO = {"actor_rollout_ref.actor": "ppo_micro_batch_size", "actor_rollout_ref.ref": "log_prob_micro_batch_size",
         "actor_rollout_ref.rollout": "log_prob_micro_batch_size"}
"""verl's micro-batch settings: each section needs exactly one of NAME and NAME_per_gpu"""


def verl_config_dir() -> Path | None:
    """verl's trainer config folder, found without importing verl (which needs its GPU stack)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "trainer" / "config"
    return folder if (folder / "_generated_ppo_trainer.yaml").is_file() else None


CONFIG_DIR = verl_config_dir()
pytestmark = pytest.mark.skipif(CONFIG_DIR is None, reason=(
    f"verl is not installed (CI installs it without its GPU dependencies: pip install --no-deps "
    f"verl=={VERL_VERSION}, see .ci/run)"))


def verl_version() -> str:
    from importlib.metadata import version

    return version("verl")


def base_config():
    """verl's full PPO trainer config, in struct mode (an unknown key is an error, as in Hydra)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(CONFIG_DIR / "_generated_ppo_trainer.yaml")
    OmegaConf.set_struct(cfg, True)
    return cfg


def compose(overrides: list[str]):
    """verl's config with ``overrides`` (``key=value``, as on main_ppo's command line) merged in."""
    from omegaconf import OmegaConf

    return OmegaConf.merge(base_config(), OmegaConf.from_dotlist(overrides))


def dotted_keys(node, prefix: str = "") -> set[str]:
    """Every key of a config tree, dotted (lists are leaves)."""
    from omegaconf import DictConfig

    out = set()
    for k in node.keys():
        key = f"{prefix}{k}"
        out.add(key)
        child = node._get_node(k)
        if isinstance(child, DictConfig) and not child._is_none():
            out |= dotted_keys(child, key + ".")
    return out


def plan_overrides(monkeypatch, capsys, tmp_path: Path, *args: str) -> dict[str, list[str]]:
    """Each run's overrides file of ``isosim plan --for verl ARGS``, as lines."""
    out = tmp_path / "plan"
    code, _, err = run(monkeypatch, capsys, "plan", "--for", "verl", "--out", out, *args)
    assert code == 0, err
    return {p.parent.name: p.read_text().splitlines() for p in sorted((out / "runs").glob("*/overrides.txt"))}


def test_the_key_list_is_the_installed_verls():
    """tests/fixtures' key list, which test_plan.py checks every override against where verl is not
    installed, is the installed verl's config (a newer verl: update the list and the pin together)."""
    pytest.importorskip("omegaconf")
    assert verl_version() == VERL_VERSION
    listed = {x for x in KEYS_FIXTURE.read_text().splitlines() if x and not x.startswith("#")}
    assert dotted_keys(base_config()) == listed


@pytest.mark.parametrize("processes, extra", [
    (1, ["--n", "2,4,8,16,32,64,128,256", "--budget", "1e7", "--max-per-device", "8"]),
    (7, ["--n", "2,3,7,16", "--budget", "1e6", "--max-per-device", "3"]),
    (8, ["--n", "4,16,64", "--budget", "2e6", "--nodes", "2", "--max-per-device", "4", "--seeds", "2"]),
])
def test_the_plans_overrides_compose_with_verls_config(monkeypatch, capsys, tmp_path, processes, extra):
    pytest.importorskip("omegaconf")
    from omegaconf import OmegaConf

    from isosim.integrations import plan as P

    runs = plan_overrides(monkeypatch, capsys, tmp_path, "--processes", str(processes), *extra)
    assert runs
    for name, lines in runs.items():
        cfg = compose(lines)  # an unknown key raises here
        resolved = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))  # every interpolation resolves
        given = OmegaConf.from_dotlist(lines)
        for line in lines:
            key = line.split("=", 1)[0]
            got, want = OmegaConf.select(resolved, key), OmegaConf.select(given, key)
            got = OmegaConf.to_container(got) if OmegaConf.is_config(got) else got
            want = OmegaConf.to_container(want) if OmegaConf.is_config(want) else want
            assert got == want and type(got) is type(want), (name, key, got, want)
        s = {k: OmegaConf.select(resolved, k) for k in (
            "trainer.n_gpus_per_node", "trainer.nnodes", "data.train_batch_size", "actor_rollout_ref.rollout.n",
            "actor_rollout_ref.actor.ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")}
        assert all(type(v) is int for v in s.values()), s
        P.check_verl(s)  # verl's batch checks, on what verl will read
        assert s["trainer.n_gpus_per_node"] * s["trainer.nnodes"] == processes  # over all nodes
        assert OmegaConf.select(resolved, "algorithm.adv_estimator") == "grpo"
        assert OmegaConf.select(resolved, "trainer.logger") == ["console", "tensorboard"]
        for section, param in MICRO.items():  # verl/utils/config.py: exactly one of the two
            both = [OmegaConf.select(resolved, f"{section}.{param}"), OmegaConf.select(resolved, f"{section}.{param}_per_gpu")]
            assert sum(v is not None for v in both) == 1, (name, section, both)


def test_a_key_verl_does_not_have_does_not_compose():
    """The composition is a real check: a misspelt key, or a key in the wrong section, is refused."""
    pytest.importorskip("omegaconf")
    from omegaconf.errors import ConfigKeyError

    assert compose(["actor_rollout_ref.rollout.n=8"]).actor_rollout_ref.rollout.n == 8
    for bad in ("actor_rollout_ref.rollout.num_generations=8", "data.rollout.n=8", "trainer.total_steps=10"):
        with pytest.raises(ConfigKeyError):
            compose([bad])


def test_hydra_composes_the_same_config(monkeypatch, capsys, tmp_path):
    """Where Hydra is installed: main_ppo's own composition of ppo_trainer.yaml with the plan's
    overrides is the one the tests above build from the generated YAML."""
    pytest.importorskip("hydra")
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    lines = next(iter(plan_overrides(monkeypatch, capsys, tmp_path, "--processes", "8", "--n", "4,16",
                                     "--budget", "2e5").values()))
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        via_hydra = OmegaConf.to_container(hydra_compose(config_name="ppo_trainer", overrides=lines), resolve=True)
        with pytest.raises(Exception, match="num_generations"):
            hydra_compose(config_name="ppo_trainer", overrides=["actor_rollout_ref.rollout.num_generations=8"])
    # Hydra keeps the name of the chosen model-engine group (``model_engine: dp``) beside the config
    assert via_hydra.pop("model_engine") == "dp"
    assert via_hydra == OmegaConf.to_container(compose(lines), resolve=True)
