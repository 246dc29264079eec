"""GRPO pieces as small functions: advantages, token weights, the per-token loss, batch packing.

Layout of a rollout batch (one problem's group is contiguous, so a group is a reshape)::

    rewards (B_p * n_est,)  --view(-1, n_est)-->  (B_p, n_est)
                               |  baseline: mean (and std for 'grpo') over all n_est columns
                               v
    advantages (B_p, n)  = first n columns, centred (and scaled)  --reshape(-1)-->  (B_p * n,)

With ``n_est == n`` this is textbook GRPO; with ``n_est > n`` it is the *decoupled baseline*
(PAPER.md finding 9): the baseline comes from n_est rollouts, the update uses n of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from isosim.sim import advantage

ADV_EPS = advantage.LLM_EPS  # (the simulator's differs; see isosim.sim.advantage)


# --- advantages: the formula is isosim.sim.advantage's, shared with the simulator ----------------


def group_advantages(rewards: torch.Tensor, n: int, n_est: int, kind: str = "grpo") -> torch.Tensor:
    """Advantages (B_p, n) of the first n rollouts of each group of n_est (see the module diagram)."""
    if rewards.numel() % n_est:
        raise ValueError(f"{rewards.numel()} rewards do not form whole groups of n_est={n_est}")
    if not 1 <= n <= n_est:
        raise ValueError(f"need 1 <= n <= n_est, got n={n}, n_est={n_est}")
    return advantage.group_advantages(rewards.float().view(-1, n_est), n, kind, ADV_EPS)


def unequal_group_advantages(rewards: torch.Tensor, sizes: Sequence[int], kind: str = "grpo") -> torch.Tensor:
    """Advantages (sum(sizes),) of consecutive groups of unequal size: group g's rewards are
    centred (and scaled) by the mean (and std) of its own ``sizes[g]`` rewards, the formula of
    :func:`group_advantages` (groups of one size are computed together, so equal sizes give its
    numbers exactly). A group of one rollout has no baseline but itself: its advantage is 0."""
    sizes = [int(k) for k in sizes]
    if any(k < 0 for k in sizes) or sum(sizes) != rewards.numel():
        raise ValueError(f"group sizes {sizes} do not cover the {rewards.numel()} rewards")
    flat = rewards.float().reshape(-1)
    out = torch.zeros_like(flat)
    starts = torch.tensor([0, *sizes[:-1]], dtype=torch.long).cumsum(0) if sizes else torch.zeros(0, dtype=torch.long)
    for k in sorted(set(sizes) - {0, 1}):
        first = starts[[g for g, size in enumerate(sizes) if size == k]]
        idx = (first[:, None] + torch.arange(k)[None, :]).reshape(-1)
        out[idx] = advantage.group_advantages(flat[idx].view(-1, k), k, kind, ADV_EPS).reshape(-1)
    return out


def unequal_zero_variance_groups(rewards: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
    """Bool (len(sizes),): groups whose rewards are all equal (a group of one always is)."""
    parts = torch.split(rewards.reshape(-1), [int(k) for k in sizes])
    return torch.tensor([bool((p == p[:1]).all()) for p in parts], dtype=torch.bool)


def zero_variance_groups(rewards: torch.Tensor, n_est: int) -> torch.Tensor:
    """Bool (B_p,): groups whose n_est rewards are all equal (they carry no policy-gradient signal)."""
    r = rewards.view(-1, n_est)
    return (r == r[:, :1]).all(dim=1)


# --- token weights: how per-token losses are averaged over the *whole* batch -----------------
# Each returns weights w (S, T) such that the batch loss is sum(w * token_loss) over every
# micro-batch: the normalisers are global (the batch's token or sequence count), so gradient
# accumulation over micro-batches gives exactly the full-batch gradient.


def _token_mean(mask: torch.Tensor, num_tokens: float, num_seqs: float, max_len: int) -> torch.Tensor:
    return mask / num_tokens


def _seq_mean_token_mean(mask: torch.Tensor, num_tokens: float, num_seqs: float, max_len: int) -> torch.Tensor:
    return mask / mask.sum(dim=1, keepdim=True).clamp(min=1.0) / num_seqs


def _seq_mean_token_sum_norm(mask: torch.Tensor, num_tokens: float, num_seqs: float, max_len: int) -> torch.Tensor:
    return mask / (max_len * num_seqs)


TOKEN_WEIGHT_FNS = {
    "token-mean": _token_mean,  # DAPO / verl default: every token counts the same
    "seq-mean-token-mean": _seq_mean_token_mean,  # original GRPO: mean per sequence, then over sequences
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,  # Dr.GRPO: token sum / a constant length
}


def token_weights(mask: torch.Tensor, kind: str, num_tokens: float, num_seqs: float, max_len: int) -> torch.Tensor:
    return TOKEN_WEIGHT_FNS[kind](mask.float(), float(num_tokens), float(num_seqs), max_len)


# --- the per-token loss -----------------------------------------------------------------------


def clipped_pg_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip_low: float,
                    clip_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate per token, ``max(-A r, -A clip(r, 1 - lo, 1 + hi))``; and where it clipped.

    ``adv`` broadcasts over tokens ((S, 1) against (S, T)).
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(unclipped, clipped), (clipped > unclipped).float()


def tis_weights(old_logp: torch.Tensor, sampler_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance weights min(pi_old / pi_sampler, C), detached (Yao et al., 2025)."""
    return torch.exp(old_logp - sampler_logp).clamp(max=cap).detach()


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(d) - d - 1 with d = ref - logp (>= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


LOGIT_CHUNK_ELEMENTS = 1 << 26  # fp32 elements per chunk of the loss head (256 MiB)


def _chunk_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float,
                    with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    x = logits.float() / temperature
    lse = torch.logsumexp(x, dim=-1)
    logp = torch.gather(x, -1, targets.unsqueeze(-1)).squeeze(-1) - lse
    if not with_entropy:
        return logp, logp.new_zeros(())
    return logp, lse - (torch.softmax(x, dim=-1) * x).sum(dim=-1)


def token_logprobs_and_entropy(logits: torch.Tensor, targets: torch.Tensor, temperature: float,
                               with_entropy: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(target) and the entropy of pi at each position, from logits / temperature (float32).

    The fp32 work (upcast, log-sum-exp, softmax) runs over chunks of positions of about
    ``LOGIT_CHUNK_ELEMENTS`` values; with gradients on, each chunk is recomputed in the backward
    pass (activation checkpointing), so the fp32 copies of the full (S, T, vocab) logits are never
    held: at 8k-token responses and a 152k vocabulary they would be ~10 GB each per micro-batch of 2.
    """
    from torch.utils.checkpoint import checkpoint

    shape = targets.shape
    vocab = logits.shape[-1]
    flat, tgt = logits.reshape(-1, vocab), targets.reshape(-1)
    rows = max(1, LOGIT_CHUNK_ELEMENTS // vocab)
    grad = torch.is_grad_enabled() and logits.requires_grad
    logps, ents = [], []
    for start in range(0, flat.shape[0], rows):
        args = (flat[start:start + rows], tgt[start:start + rows], temperature, with_entropy)
        lp, ent = checkpoint(_chunk_logprobs, *args, use_reentrant=False) if grad else _chunk_logprobs(*args)
        logps.append(lp)
        ents.append(ent)
    logp = torch.cat(logps).reshape(shape) if logps else flat.new_zeros(shape, dtype=torch.float32)
    if not with_entropy:
        return logp, None
    entropy = torch.cat(ents).reshape(shape) if ents else flat.new_zeros(shape, dtype=torch.float32)
    return logp, entropy


# --- packing rollouts into a micro-batch ------------------------------------------------------
#
#              P: prompts, left-padded          R: responses, right-padded
#    row 0:  [pad pad  p   p   p   p   p  | r0  r1  r2  eos pad pad]
#    row 1:  [ p   p   p   p   p   p   p  | r0  r1  r2  r3  r4  r5 ]
#                                     ^ position P-1 predicts r0
#    position_ids count real tokens only (they match generate's), attention_mask hides pads.
#    With logits_to_keep = R + 1 the model returns logits at positions P-1 .. P+R-1; the last one
#    predicts nothing and is dropped, so logits[:, t] scores response token t.


def pack(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], pad_id: int,
         device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Tensors for one micro-batch: input_ids, attention_mask, position_ids, response ids and mask."""
    if len(prompts) != len(responses):
        raise ValueError("one prompt per response")
    P = max(len(p) for p in prompts)
    R = max(max(len(r) for r in responses), 1)
    S = len(prompts)
    input_ids = torch.full((S, P + R), pad_id, dtype=torch.long)
    attn = torch.zeros((S, P + R), dtype=torch.long)
    resp_mask = torch.zeros((S, R), dtype=torch.float32)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        input_ids[i, P - len(p):P] = torch.tensor(p, dtype=torch.long)
        attn[i, P - len(p):P] = 1
        if len(r):
            input_ids[i, P:P + len(r)] = torch.tensor(r, dtype=torch.long)
            attn[i, P:P + len(r)] = 1
            resp_mask[i, :len(r)] = 1.0
    position_ids = (attn.cumsum(dim=1) - 1).clamp(min=0)
    return {
        "input_ids": input_ids.to(device),
        "attention_mask": attn.to(device),
        "position_ids": position_ids.to(device),
        "response_ids": input_ids[:, P:].to(device),
        "response_mask": resp_mask.to(device),
        "prompt_len": torch.tensor(P),
    }


def pad_values(rows: Sequence[Sequence[float]], width: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Right-pad per-token float rows (e.g. sampler log-probs) to ``width`` with zeros."""
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        if len(r):
            out[i, :len(r)] = torch.tensor(r[:width], dtype=torch.float32)
    return out.to(device)
