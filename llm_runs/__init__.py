"""Real GRPO runs whose records the isosim frontier analysis reads (see docs/real_runs.md).

The parts, lowest first (each imports only from the parts above it in this list; see
docs/architecture.md):

======================  ===================================================================
``config``              ``RunConfig``: every knob, validated on construction; flags and files
``problems.data``       JSON Lines / HF problem sets, train/val split, calibration files,
                        prompts, epoch-wise batch order (``isosim.sim.epochs``)
``problems.rewards``    0/1 math-verify rewards with bounded work per answer
``problems.make_arith`` seeded arithmetic problem sets
``sampling.batch``      the sampler interface and what a sampler returns (``SampleBatch``)
``sampling.samplers``   the transformers (``hf``) backend and ``make_sampler``
``sampling.vllm_sampler`` the colocated vLLM backend (GPU; imported only when asked for)
``sampling.models``     model resolution (hub id, folder, ``.gguf``, ``smollm2-135m``), loading
``sampling.tiny``       a tiny random Llama + character tokenizer for tests and smoke runs
``training.grpo``       advantages (``isosim.sim.advantage``'s formula), token weights, the
                        clipped PG / TIS / KL / entropy terms, packing
``training.metrics``    unbiased avg@k, best@k, worst@k and the pass@1 histogram
``training.runlog``     the run folder: append-only logs and atomic checkpoints
``training.processes``  per-process seeds, stop signals, distributed checks, FSDP settings
``training.policy_update`` the trainer's optimizer steps on a batch of sequences
``training.trainer_eval`` the trainer's evaluation points and records rows
``training.train``      the trainer and the entry point ``python -m llm_runs.training.train``
``launch.calibrate``    measured difficulty profiles (``isosim calibrate``)
``launch.plan``         a validation plan and its runs
``launch.launchers``    the local and SLURM launchers of a validation plan
``launch.validate``     ``isosim validate``: predict, plan, analyse (pure parts:
                        ``isosim.validation``)
``organism``            the model organism: ``build`` (``python -m llm_runs.organism``),
                        ``predict`` (the simulator's prediction), ``compare`` (with real sweeps)
======================  ===================================================================

Importing ``llm_runs`` imports nothing heavy; torch, transformers and accelerate are imported by
the modules that need them.
"""
