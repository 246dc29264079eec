"""What each process of a run needs: seeds derived per (seed, step, rank, draw), stop signals
(SLURM's preemption warning) turned into a checkpoint and a clean exit, and the checks and FSDP
settings of distributed set-ups."""

from __future__ import annotations

from typing import Any

import numpy as np

from isosim.errors import IsosimError

TAG_TRAIN, TAG_VAL, TAG_TRAIN_EVAL, TAG_ALLOC = 0, 1, 2, 3  # which draws a derived seed is for


def derive_seed(*parts: int) -> int:
    """A 31-bit seed that is a pure function of ``parts`` (e.g. (seed, step, rank, tag))."""
    return int(np.random.SeedSequence([int(p) & 0xFFFFFFFF for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)


STOP_SIGNALS = ("SIGTERM", "SIGUSR1")  # what SLURM sends before a preemption or the time limit


def install_stop_handlers(trainer: Any) -> None:
    """On SIGTERM / SIGUSR1 the trainer finishes its step, checkpoints and exits (no lost steps).

    ``trainer`` is the running ``GRPOTrainer`` (this module stays below it: it only sets the
    trainer's ``_stop_signal`` and ``_saved_handlers``)."""
    import signal
    import threading

    trainer._saved_handlers = {}
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: Any) -> None:
        trainer._stop_signal = signum

    for name in STOP_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            trainer._saved_handlers[sig] = signal.signal(sig, handler)


def restore_stop_handlers(trainer: Any) -> None:
    import signal

    for sig, old in getattr(trainer, "_saved_handlers", {}).items():
        signal.signal(sig, old)
    trainer._saved_handlers = {}


def check_distributed(distributed_type: Any, sampler: str) -> None:
    """Refuse the set-ups this trainer cannot run correctly, with the reason."""
    from accelerate.utils import DistributedType

    if distributed_type == DistributedType.DEEPSPEED:
        # Accelerate's DeepSpeed backward steps the engine whenever sync_gradients is true, which
        # no_sync does not change: every micro-batch would be an optimizer step.
        raise IsosimError("DeepSpeed is not supported (its engine would take an optimizer step on every "
                          "micro-batch of a GRPO step): use FSDP (fsdp_version 2) in the accelerate config")
    if sampler in ("hf", "lean") and distributed_type == DistributedType.FSDP:
        raise IsosimError("the hf sampler needs the whole model on every process: use --sampler vllm "
                          "with FSDP, or plain DDP")


def fp32_gradient_reduction(plugin: Any) -> Any:
    """bf16 compute, fp32 gradient reduction and accumulation under FSDP (Accelerate reduces in bf16).

    With FSDP2, ``reduce_dtype=float32`` also makes gradients accumulated under ``no_sync`` (our
    ~64 micro-batches of a step) fp32. Returns the policy set on ``plugin``.
    """
    import torch

    if getattr(plugin, "fsdp_version", 1) == 2:
        from torch.distributed.fsdp import MixedPrecisionPolicy

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        from torch.distributed.fsdp import MixedPrecision

        policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.float32)
    plugin.mixed_precision_policy = policy
    return policy
