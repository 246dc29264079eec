"""Real GRPO runs whose records the isosim frontier analysis reads (see docs/real_runs.md).

Modules, each with one job:

=================  ==========================================================================
``config``         ``RunConfig``: every knob, validated on construction; flags and config files
``data``           JSON Lines / HF problem sets, train/val split, calibration files, prompts,
                   epoch-wise batch order (``isosim.epochs``)
``rewards``        0/1 math-verify rewards with bounded work per answer
``grpo``           advantages (``isosim.advantage``'s formula), token weights, the clipped PG /
                   TIS / KL / entropy terms, packing
``metrics``        unbiased avg@k, best@k, worst@k and the pass@1 histogram
``samplers``       the sampler interface and the transformers (``hf``) backend
``vllm_sampler``   the colocated vLLM backend (GPU; imported only when asked for)
``models``         model resolution (hub id, folder, ``.gguf``, ``smollm2-135m``) and loading
``runlog``         the run folder: append-only logs and atomic checkpoints
``train``          the trainer and the entry point ``python -m llm_runs.train``
``policy_update``  the trainer's optimizer steps on a batch of sequences (micro-batched)
``trainer_eval``   the trainer's evaluation points and records rows
``processes``      per-process seeds, stop signals, distributed set-up checks and FSDP settings
``calibrate``      measured difficulty profiles (``isosim calibrate``)
``validate``       ``isosim validate``: predict, plan, analyse (the pure parts: ``isosim.validation``)
``launchers``      the local and SLURM launchers of a validation plan
``tiny``           a tiny random Llama + character tokenizer for tests and smoke runs
``make_arith``     seeded arithmetic problem sets
=================  ==========================================================================

Importing ``llm_runs`` imports nothing heavy; torch, transformers and accelerate are imported by
the modules that need them.
"""
