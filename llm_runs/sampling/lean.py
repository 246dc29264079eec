"""A lean sampler for small Llama-style causal LMs (the model organism): ``sampler: lean``.

The hand-written layer (`LlamaParts`, `_layer`, `_attend`, `_prompt_forward`) is shared with the
update's lean forward (``llm_runs.training.lean_forward``).

``transformers``' ``generate`` spends most of its time, on a model of 0.15 M parameters, in
per-token Python (cache objects, logits processors, stopping criteria, mask building) rather
than arithmetic. ``LeanSampler`` runs the same model's modules (embedding, RMSNorms, the
q/k/v/o and MLP projections, rotary embedding, LM head: the very weights the trainer updates, so
no sync is needed) in a short loop over a preallocated key/value cache, and saves work that
``generate`` repeats:

* **one prefill per prompt**, not per sample: the ``n`` samples of a prompt share its keys and
  values (the prompt part of the cache is computed for the unique prompts and gathered per row;
  with unequal ``n[i]`` each prompt's group shares its own prefill the same way);
* **finished rows leave the batch**: rows that emitted an end-of-sequence token are dropped from
  the cache (``generate`` keeps computing them and throws the tokens away).

The draws are ``generate``'s: with the same seed, each step draws the same exponential noise for
the whole chunk (``torch.multinomial`` with one sample is ``argmax(probs / Exp(1))`` over a noise
tensor of the probabilities' shape), and a row's token is the argmax of its own probabilities over
its own noise, so the tokens equal ``generate``'s wherever the probabilities agree to float
rounding (the arithmetic order differs, so a near-tie may flip; the test measures how often).
Temperature and top-p are applied as ``HFSampler`` does, and the log-probs are those of the
distribution drawn from. The returned ``SampleBatch`` has ``HFSampler``'s layout and semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from isosim.errors import IsosimError
from llm_runs.sampling.batch import SampleBatch, check_stop, group_sizes, report_chunk


class LlamaParts:
    """The modules of a ``LlamaForCausalLM``-shaped model, read for a hand-written forward."""

    def __init__(self, model: Any):
        inner = getattr(model, "model", None)
        layers = getattr(inner, "layers", None)
        if inner is None or layers is None or not hasattr(model, "lm_head") or not len(layers):
            raise IsosimError("sampler 'lean' needs a Llama-style causal LM (model.model.layers, lm_head); "
                              "use sampler 'hf' for this model")
        attn = layers[0].self_attn
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            if not hasattr(attn, name):
                raise IsosimError(f"sampler 'lean': attention without {name}; use sampler 'hf' for this model")
        if not all(hasattr(layers[0].mlp, n) for n in ("gate_proj", "up_proj", "down_proj")):
            raise IsosimError("sampler 'lean': MLP is not gate/up/down; use sampler 'hf' for this model")
        cfg = model.config
        rope_type = (getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}).get(
            "rope_type", "default")
        if rope_type != "default" or getattr(cfg, "sliding_window", None):
            raise IsosimError(f"sampler 'lean' supports plain RoPE and full attention (got rope {rope_type!r}); "
                              "use sampler 'hf' for this model")
        self.model, self.embed, self.layers = model, inner.embed_tokens, layers
        self.norm, self.head, self.rotary = inner.norm, model.lm_head, inner.rotary_emb
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads)
        self.groups = self.heads // self.kv_heads
        self.scaling = float(getattr(attn, "scaling", self.head_dim ** -0.5))
        self.split = (self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim)

    def weights(self) -> list[dict[str, Any]]:
        """Per layer: the q/k/v and gate/up projections fused into one matrix each (fewer, larger
        matmuls), read from the modules now (so a forward sees the current weights; with
        gradients on, the fused matrices are part of the graph)."""
        out = []
        for layer in self.layers:
            a, m = layer.self_attn, layer.mlp

            def cat(*mods: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
                w = torch.cat([x.weight for x in mods])
                b = torch.cat([x.bias for x in mods]) if mods[0].bias is not None else None
                return w, b

            out.append({"ln1": layer.input_layernorm, "ln2": layer.post_attention_layernorm,
                        "qkv": cat(a.q_proj, a.k_proj, a.v_proj),
                        "o": (a.o_proj.weight, a.o_proj.bias), "gu": cat(m.gate_proj, m.up_proj),
                        "down": (m.down_proj.weight, m.down_proj.bias), "act": m.act_fn})
        return out

    def rope_table(self, length: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of positions 0..length-1, (length, head_dim), by the model's own rotary module."""
        pos = torch.arange(length, device=like.device)[None]
        cos, sin = self.rotary(like, pos)
        return cos[0], sin[0]


def _rms(norm: Any, x: torch.Tensor) -> torch.Tensor:
    # LlamaRMSNorm (fp32 statistics, then the weight), as one call
    if x.dtype == torch.float32:
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), norm.weight, norm.variance_epsilon)
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * h.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _linear(x: torch.Tensor, wb: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
    return torch.nn.functional.linear(x, wb[0], wb[1])


def _layer(parts: LlamaParts, w: dict[str, Any], x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
           attend: Any) -> torch.Tensor:
    """One decoder layer on x (rows, L, hidden); ``attend(q, k, v)`` gets q (rows, heads, L, d) and
    this layer's rotated k, v (rows, kv_heads, L, d) and returns (rows, heads, L, d)."""
    R, L, _ = x.shape
    qkv = _linear(_rms(w["ln1"], x), w["qkv"]).view(R, L, parts.heads + 2 * parts.kv_heads, parts.head_dim)
    qkv = qkv.transpose(1, 2)
    qk = _rotate(qkv[:, :parts.heads + parts.kv_heads], cos, sin)  # q and k rotated together
    q, k, v = qk[:, :parts.heads], qk[:, parts.heads:], qkv[:, parts.heads + parts.kv_heads:]
    x = x + _linear(attend(q, k, v).transpose(1, 2).reshape(R, L, -1), w["o"])
    g, u = _linear(_rms(w["ln2"], x), w["gu"]).chunk(2, dim=-1)
    return x + _linear(w["act"](g) * u, w["down"])


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor, parts: LlamaParts
            ) -> torch.Tensor:
    """Softmax attention of q over k, v where ``allowed`` (broadcast to (rows, 1, Lq, Lk)) is true."""
    if parts.groups > 1:
        k, v = k.repeat_interleave(parts.groups, dim=1), v.repeat_interleave(parts.groups, dim=1)
    s = (q @ k.transpose(-1, -2)) * parts.scaling
    s = s.masked_fill(~allowed, torch.finfo(s.dtype).min).softmax(dim=-1)
    return s @ v


def _head(parts: LlamaParts, x: torch.Tensor) -> torch.Tensor:
    return parts.head(_rms(parts.norm, x))


def _prompt_geometry(pmask: torch.Tensor, cos_t: torch.Tensor, sin_t: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For left-padded prompts with mask (rows, W): the rotary cos / sin at each token's position
    (padding counts as position 0) and the causal attention mask that skips padding."""
    W = pmask.shape[1]
    pos = (pmask.long().cumsum(1) - 1).clamp(min=0)
    allowed = torch.tril(torch.ones(W, W, dtype=torch.bool, device=pmask.device)) & pmask[:, None, None, :]
    return cos_t[pos][:, None], sin_t[pos][:, None], allowed


def _prompt_forward(parts: LlamaParts, weights: list[dict[str, Any]], ids: torch.Tensor, pmask: torch.Tensor,
                    cos_t: torch.Tensor, sin_t: torch.Tensor) -> tuple[torch.Tensor, list[Any]]:
    """Left-padded prompts (U, W): last-position logits (U, V) and each layer's rotated (k, v)."""
    cos, sin, allowed = _prompt_geometry(pmask, cos_t, sin_t)
    kv: list[Any] = []

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        kv.append((k, v))
        return _attend(q, k, v, allowed, parts)

    x = parts.embed(ids)
    for w in weights:
        x = _layer(parts, w, x, cos, sin, attend)
    return _head(parts, x[:, -1]), kv


def _decode(parts: LlamaParts, weights: list[dict[str, Any]], tokens: torch.Tensor, positions: torch.Tensor,
            slot: int, keys: list[torch.Tensor], values: list[torch.Tensor], valid: torch.Tensor,
            cos_t: torch.Tensor, sin_t: torch.Tensor) -> torch.Tensor:
    """One token per row: writes its keys/values at ``slot`` and returns next-token logits (R, V).
    ``valid`` (R, slot + 1) marks the cache slots each row may attend to."""
    R = tokens.shape[0]
    cos, sin = cos_t[positions][:, None, None], sin_t[positions][:, None, None]
    blocked = ~valid[:, None, None, :]
    layer_i = iter(range(len(weights)))

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        i = next(layer_i)
        kc, vc = keys[i], values[i]
        kc[:, :, slot:slot + 1], vc[:, :, slot:slot + 1] = k, v
        qg = q.reshape(R, parts.kv_heads, parts.groups, parts.head_dim)  # query heads grouped by kv head
        s = (qg @ kc[:, :, :slot + 1].transpose(-1, -2)) * parts.scaling  # (R, kv, groups, slot+1)
        s = s.masked_fill(blocked, torch.finfo(s.dtype).min).softmax(dim=-1)
        return (s @ vc[:, :, :slot + 1]).reshape(R, parts.heads, 1, parts.head_dim)

    x = parts.embed(tokens)[:, None]
    for w in weights:
        x = _layer(parts, w, x, cos, sin, attend)
    return _head(parts, x[:, 0])


class LeanSampler:
    """Sampling loop over a preallocated KV cache for small Llama-style models (see the module doc).

    Chunks of ``batch_size`` requests, in ``HFSampler``'s order and with its seeding, so that the
    random draws are the same as ``generate``'s."""

    COMPACT_AT = 0.25  # drop finished rows from the cache once they are this share of it

    def __init__(self, model: Any, tokenizer: Any, eos_ids: Sequence[int], batch_size: int = 64,
                 autocast_dtype: torch.dtype | None = None):
        self.tokenizer = tokenizer
        self.eos = [int(e) for e in eos_ids]
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos[0])
        self.batch_size = batch_size
        self.autocast_dtype = autocast_dtype
        self.sync_weights(model)

    def sync_weights(self, model: Any) -> None:
        self.model = model  # the training model itself: its modules are read at each call
        self.parts = LlamaParts(model)

    def release(self) -> None:
        pass

    needs_sync = False
    should_stop: Callable[[], bool] | None = None  # set by the trainer while a call may be dropped
    on_chunk: Callable[[int, int], None] | None = None  # told (done, total) after each chunk

    def close(self) -> None:
        pass

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], n: int | Sequence[int], temperature: float, top_p: float,
                 max_new_tokens: int, seed: int) -> SampleBatch:
        out = SampleBatch()
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        prompts = [list(p) for p in prompts]
        requests = [i for i, k in enumerate(group_sizes(n, len(prompts))) for _ in range(k)]
        fork_devices = [device] if device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=fork_devices):
                torch.manual_seed(seed)
                for start in range(0, len(requests), self.batch_size):
                    check_stop(self)
                    chunk = requests[start:start + self.batch_size]
                    autocast = (torch.autocast(device.type, dtype=self.autocast_dtype)
                                if self.autocast_dtype is not None else torch.autocast(device.type, enabled=False))
                    with autocast:
                        tokens, logps = self._chunk([prompts[i] for i in chunk], temperature, top_p,
                                                    max_new_tokens, device)
                    eos = set(self.eos)
                    for i, row, lp in zip(chunk, tokens, logps):
                        out.add(prompts[i], row, lp, eos)
                    report_chunk(self, len(out), len(requests))
        finally:
            if was_training:
                self.model.train()
        out.texts = self.tokenizer.batch_decode(out.completion_ids, skip_special_tokens=True)
        return out

    def _chunk(self, chunk: list[list[int]], temperature: float, top_p: float, max_new: int,
               device: torch.device) -> tuple[list[list[int]], list[list[float]]]:
        """Sample one chunk; returns every row's tokens and log-probs (up to its eos or max_new)."""
        parts = self.parts
        B = len(chunk)
        # unique prompts (consecutive repeats: requests are prompt-major) and each row's prompt
        uniq: list[list[int]] = []
        group = []
        for p in chunk:
            if not uniq or uniq[-1] is not p:
                uniq.append(p)
            group.append(len(uniq) - 1)
        W = max(len(p) for p in uniq)
        ids = torch.full((len(uniq), W), self.pad_id, dtype=torch.long)
        pmask = torch.zeros((len(uniq), W), dtype=torch.bool)
        for i, p in enumerate(uniq):
            ids[i, W - len(p):] = torch.tensor(p, dtype=torch.long)
            pmask[i, W - len(p):] = True
        ids, pmask = ids.to(device), pmask.to(device)
        weights = parts.weights()
        cos_t, sin_t = parts.rope_table(W + max_new, parts.embed.weight)
        logits_u, kv = _prompt_forward(parts, weights, ids, pmask, cos_t, sin_t)
        g = torch.tensor(group, dtype=torch.long, device=device)
        keys, values = [], []
        for k, v in kv:  # each row's cache: its prompt's keys/values, then room for max_new tokens
            kc = k.new_zeros((B, parts.kv_heads, W + max_new, parts.head_dim))
            vc = torch.zeros_like(kc)
            kc[:, :, :W], vc[:, :, :W] = k.index_select(0, g), v.index_select(0, g)
            keys.append(kc)
            values.append(vc)
        logits = logits_u.index_select(0, g)
        valid = torch.zeros((B, W + max_new), dtype=torch.bool, device=device)
        valid[:, :W] = pmask.index_select(0, g)
        plen = pmask.sum(1).index_select(0, g)
        rows = torch.arange(B, device=device)  # request row of each cache row
        vocab = logits.shape[-1]
        eos = torch.tensor(self.eos, dtype=torch.long, device=device)
        out_tok = torch.full((B, max_new), self.pad_id, dtype=torch.long, device=device)
        out_lp = torch.zeros((B, max_new), dtype=torch.float32, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)  # per cache row
        top_p_warper = None
        if top_p < 1.0:
            from transformers import TopPLogitsWarper

            top_p_warper = TopPLogitsWarper(top_p=top_p)
        for t in range(max_new):
            if t % 8 == 7:
                check_stop(self)
            scores = logits.float()
            if temperature != 1.0:
                scores = scores / temperature
            if top_p_warper is not None:
                scores = top_p_warper(None, scores)
            logp = torch.log_softmax(scores, dim=-1)
            probs = torch.softmax(scores, dim=-1)
            # generate's torch.multinomial(probs, 1) on the whole chunk is argmax(probs / Exp(1) noise)
            noise = torch.empty((B, vocab), dtype=torch.float32, device=device).exponential_(1)
            tok = (probs / noise.index_select(0, rows)).argmax(dim=-1)
            live = ~done
            out_tok[rows[live], t] = tok[live]
            out_lp[rows[live], t] = logp.gather(1, tok[:, None]).squeeze(1)[live]
            done = done | torch.isin(tok, eos)
            if bool(done.all()) or t + 1 == max_new:
                break
            if float(done.float().mean()) >= self.COMPACT_AT:
                keep = (~done).nonzero().squeeze(1)
                rows, tok, plen, valid = rows[keep], tok[keep], plen[keep], valid[keep]
                keys = [k.index_select(0, keep) for k in keys]
                values = [v.index_select(0, keep) for v in values]
                done = done[keep]
            valid[:, W + t] = True
            logits = _decode(parts, weights, tok, plen + t, W + t, keys, values, valid[:, :W + t + 1], cos_t, sin_t)
        return out_tok.tolist(), out_lp.tolist()
