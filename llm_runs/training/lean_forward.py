"""The update's lean forward for small Llama-style models: ``train_forward: lean``.

The trainer's forward (``PolicyUpdate._forward`` through ``grpo.pack``) runs every sequence as
prompt + response, each row padded to the longest prompt plus the longest response of the
micro-batch: on the organism ~55 positions a row for ~8 response tokens, and the prompt, shared
by the n rows of a group, is computed n times. ``response_logprobs`` computes each distinct
prompt once (its keys and values enter every row of its group by an index, so gradients sum
over the group) and runs the responses in a few buckets of similar length, against the prompt
keys plus their own causal keys. Same model, same positions, same masks: log-probs equal
``_forward``'s to float rounding (the test bounds the gap).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from llm_runs.sampling.lean import LlamaParts, _attend, _head, _layer, _prompt_forward
from llm_runs.training.grpo import LOGIT_CHUNK_ELEMENTS, _chunk_logprobs, token_logprobs_and_entropy


def _buckets(lengths: list[int], waste: float = 0.7, min_rows: int = 64) -> list[list[int]]:
    """Row indices grouped by response length, longest first; a bucket of at least ``min_rows``
    rows closes when a row would be shorter than ``waste`` x its longest (bounded padding, few
    forwards: on small batches one forward costs less than the padding it would save)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    out: list[list[int]] = []
    for i in order:
        if not out or (len(out[-1]) >= min_rows and lengths[i] < waste * lengths[out[-1][0]]):
            out.append([])
        out[-1].append(i)
    return out


def response_logprobs(parts: LlamaParts, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]],
                      pad_id: int, temperature: float, with_entropy: bool, device: Any = "cpu",
                      bucket_rows: int = 64) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Per-token log-probs (and entropy) of ``responses`` after ``prompts`` under ``parts``' model.

    Returns ``(logp, entropy, response_ids, response_mask)``, each (rows, R) with R the longest
    response, laid out as ``grpo.pack``'s response part; autograd flows when enabled."""
    S = len(prompts)
    R = max(max((len(r) for r in responses), default=1), 1)
    resp_ids = torch.full((S, R), pad_id, dtype=torch.long)
    resp_mask = torch.zeros((S, R), dtype=torch.float32)
    for i, r in enumerate(responses):
        if len(r):
            resp_ids[i, :len(r)] = torch.tensor(list(r), dtype=torch.long)
            resp_mask[i, :len(r)] = 1.0
    resp_ids, resp_mask = resp_ids.to(device), resp_mask.to(device)
    # distinct prompts, computed once
    index: dict[tuple[int, ...], int] = {}
    group = [index.setdefault(tuple(p), len(index)) for p in prompts]
    uniq = list(index)
    U, W = len(uniq), max(len(p) for p in uniq)
    ids = torch.full((U, W), pad_id, dtype=torch.long)
    pmask = torch.zeros((U, W), dtype=torch.bool)
    for i, p in enumerate(uniq):
        ids[i, W - len(p):] = torch.tensor(p, dtype=torch.long)
        pmask[i, W - len(p):] = True
    ids, pmask = ids.to(device), pmask.to(device)
    plen = pmask.sum(1)
    weights = parts.weights()
    cos_t, sin_t = parts.rope_table(W + R, parts.embed.weight)
    first, pkv = _prompt_forward(parts, weights, ids, pmask, cos_t, sin_t)  # first: predicts response token 0
    g_all = torch.tensor(group, dtype=torch.long, device=device)
    logps, ents, rows = [], [], []
    for bucket in _buckets([len(r) for r in responses], min_rows=bucket_rows):
        b = torch.tensor(bucket, dtype=torch.long, device=device)
        g = g_all.index_select(0, b)
        L = max(max(len(responses[i]) for i in bucket), 1)
        n = len(bucket)
        logits = first.index_select(0, g)[:, None]  # (n, 1, V)
        if L > 1:
            pos = plen.index_select(0, g)[:, None] + torch.arange(L - 1, device=device)[None]
            cos, sin = cos_t[pos][:, None], sin_t[pos][:, None]
            allowed = torch.cat([pmask.index_select(0, g)[:, None, None, :].expand(n, 1, L - 1, W),
                                 torch.tril(torch.ones(L - 1, L - 1, dtype=torch.bool, device=device))
                                 .expand(n, 1, L - 1, L - 1)], dim=-1)
            layer_kv = iter(pkv)

            def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
                k0, v0 = next(layer_kv)  # the group's prompt keys/values, then the row's own
                return _attend(q, torch.cat([k0.index_select(0, g), k], dim=2),
                               torch.cat([v0.index_select(0, g), v], dim=2), allowed, parts)

            x = parts.embed(resp_ids.index_select(0, b)[:, :L - 1])  # inputs: response tokens 0..L-2
            for w in weights:
                x = _layer(parts, w, x, cos, sin, attend)
            logits = torch.cat([logits, _head(parts, x)], dim=1)  # (n, L, V)
        targets = resp_ids.index_select(0, b)[:, :L]
        if logits.numel() <= LOGIT_CHUNK_ELEMENTS:  # small vocabulary: no chunking, no recompute
            lp, ent = _chunk_logprobs(logits, targets, temperature, with_entropy)
            ent = ent if with_entropy else None
        else:
            lp, ent = token_logprobs_and_entropy(logits, targets, temperature, with_entropy=with_entropy)
        logps.append(torch.nn.functional.pad(lp, (0, R - L)))
        if ent is not None:
            ents.append(torch.nn.functional.pad(ent, (0, R - L)))
        rows.extend(bucket)
    inverse = torch.empty(S, dtype=torch.long)
    inverse[torch.tensor(rows, dtype=torch.long)] = torch.arange(S)
    inverse = inverse.to(device)
    logp = torch.cat(logps).index_select(0, inverse)
    entropy = torch.cat(ents).index_select(0, inverse) if with_entropy else None
    return logp, entropy, resp_ids, resp_mask
