"""The lean forward and sampling loop over K models of one architecture at once (stacked weights).

A small-n organism run spends most of its time on per-operation costs (Python, dispatch) of tiny
matmuls, not on arithmetic. ``StackedParts`` reads K ``LlamaParts`` (K runs' models) as [K, ...]
tensors, so that one batched matmul (``torch.bmm``) does the work of K: the hidden states of
the K runs are laid out (K, rows, length, hidden), projections are batched over K, and the
attention, which has no weights, runs on the K * rows flattened batch with the lean path's own
code (``llm_runs.sampling.lean``).

* ``generate_many`` is ``LeanSampler.generate`` for K runs in one loop: each run keeps its own
  random stream (a ``torch.Generator`` seeded as the run's own sampler seeds the global one) and
  draws its exponential noise at exactly the steps the single run draws it, over the same
  (chunk, vocab) shape, so each run's tokens are those of its single-run sampler wherever the
  probabilities agree to float rounding.
* ``response_logprobs_many`` is ``lean_forward.response_logprobs`` for K runs: each distinct
  prompt once, the responses in one bucket; gradients reach each run's own parameters (the
  stacking is part of the graph).

The stacked weights are built per call (``torch.stack`` of each parameter: ~25 operations), so
they always hold the models' current values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from isosim.errors import IsosimError
from llm_runs.sampling.batch import SampleBatch
from llm_runs.sampling.lean import LeanSampler, LlamaParts, _attend, _prompt_geometry, _rotate
from llm_runs.training.grpo import _chunk_logprobs


class StackedParts:
    """K ``LlamaParts`` of one architecture, read as [K, ...] tensors (see the module doc)."""

    def __init__(self, parts: Sequence[LlamaParts]):
        if not parts:
            raise IsosimError("stacked forward: no models")
        p0 = parts[0]
        shape = [tuple(p.model.state_dict()[k].shape) for p in parts[:1] for k in p.model.state_dict()]
        for p in parts[1:]:
            if [tuple(v.shape) for v in p.model.state_dict().values()] != shape:
                raise IsosimError("stacked forward: the models differ in architecture")
        if p0.head.bias is not None:
            raise IsosimError("stacked forward: an LM head with a bias is not supported")
        self.parts, self.K = list(parts), len(parts)
        self.heads, self.kv_heads, self.head_dim = p0.heads, p0.kv_heads, p0.head_dim
        self.groups, self.scaling, self.rope_table = p0.groups, p0.scaling, p0.rope_table
        self.tied = all(p.head.weight is p.embed.weight for p in parts)
        self.eps = [(layer.input_layernorm.variance_epsilon, layer.post_attention_layernorm.variance_epsilon)
                    for layer in p0.layers]
        self.norm_eps = p0.norm.variance_epsilon
        self.act = p0.layers[0].mlp.act_fn
        self.vocab = p0.embed.weight.shape[0]

    def weights(self) -> dict[str, Any]:
        """The stacked weights now (inside the caller's grad mode: with gradients on, they are part
        of the graph and each run's gradient reaches its own parameters)."""
        def st(get: Any) -> torch.Tensor:
            return torch.stack([get(p) for p in self.parts])

        def fused(*names: str, sub: str) -> tuple[torch.Tensor, torch.Tensor | None]:
            ws = [st(lambda p, n=n: getattr(getattr(p.layers[i], sub), n).weight) for n in names]
            bias = getattr(getattr(self.parts[0].layers[i], sub), names[0]).bias
            bs = ([st(lambda p, n=n: getattr(getattr(p.layers[i], sub), n).bias) for n in names]
                  if bias is not None else None)
            return (torch.cat(ws, dim=1) if len(ws) > 1 else ws[0],
                    (torch.cat(bs, dim=1) if len(bs) > 1 else bs[0]) if bs is not None else None)

        layers = []
        for i in range(len(self.parts[0].layers)):
            layers.append({
                "ln1": st(lambda p: p.layers[i].input_layernorm.weight),
                "ln2": st(lambda p: p.layers[i].post_attention_layernorm.weight),
                "qkv": fused("q_proj", "k_proj", "v_proj", sub="self_attn"), "o": fused("o_proj", sub="self_attn"),
                "gu": fused("gate_proj", "up_proj", sub="mlp"), "down": fused("down_proj", sub="mlp"),
                "eps": self.eps[i]})
        embed = st(lambda p: p.embed.weight)
        head = embed if self.tied else st(lambda p: p.head.weight)
        return {"layers": layers, "embed": embed, "norm": st(lambda p: p.norm.weight), "head": head}


def _linear(x: torch.Tensor, wb: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
    """x (K, ..., in) by each run's own (out, in) weight: (K, ..., out)."""
    w, b = wb
    flat = x.reshape(x.shape[0], -1, x.shape[-1])
    y = torch.bmm(flat, w.transpose(1, 2)) if b is None else torch.baddbmm(b[:, None], flat, w.transpose(1, 2))
    return y.view(*x.shape[:-1], w.shape[1])


def _rms(weight: torch.Tensor, x: torch.Tensor, eps: float) -> torch.Tensor:
    scale = weight.view(weight.shape[0], *([1] * (x.dim() - 2)), weight.shape[1])
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), None, eps) * scale


def _embed(sp: StackedParts, w: dict[str, Any], ids: torch.Tensor) -> torch.Tensor:
    """Token ids (K, ...) through each run's own embedding: (K, ..., hidden)."""
    K, V = ids.shape[0], sp.vocab
    offset = (torch.arange(K, device=ids.device) * V).view(K, *([1] * (ids.dim() - 1)))
    return torch.nn.functional.embedding(ids + offset, w["embed"].reshape(K * V, -1))


def _head(sp: StackedParts, w: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    return _linear(_rms(w["norm"], x, sp.norm_eps), (w["head"], None))


def _layer(sp: StackedParts, w: dict[str, Any], x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
           attend: Any) -> torch.Tensor:
    """``lean._layer`` on x (K, rows, L, hidden); ``attend`` sees the K * rows flattened batch."""
    K, R, L, _ = x.shape
    qkv = _linear(_rms(w["ln1"], x, w["eps"][0]), w["qkv"]).view(K * R, L, sp.heads + 2 * sp.kv_heads, sp.head_dim)
    qkv = qkv.transpose(1, 2)
    qk = _rotate(qkv[:, :sp.heads + sp.kv_heads], cos, sin)
    q, k, v = qk[:, :sp.heads], qk[:, sp.heads:], qkv[:, sp.heads + sp.kv_heads:]
    x = x + _linear(attend(q, k, v).transpose(1, 2).reshape(K, R, L, -1), w["o"])
    g, u = _linear(_rms(w["ln2"], x, w["eps"][1]), w["gu"]).chunk(2, dim=-1)
    return x + _linear(sp.act(g) * u, w["down"])


def _prompts(per_run: Sequence[Sequence[Sequence[int]]], pad_id: int, device: Any
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompt ids and masks (K, U, W); runs with fewer prompts get [pad] fillers."""
    U = max(len(u) for u in per_run)
    W = max(len(p) for u in per_run for p in u)
    ids = torch.full((len(per_run), U, W), pad_id, dtype=torch.long)
    pmask = torch.zeros((len(per_run), U, W), dtype=torch.bool)
    pmask[:, :, -1] = True
    for k, uniq in enumerate(per_run):
        for i, p in enumerate(uniq):
            ids[k, i, W - len(p):] = torch.tensor(list(p), dtype=torch.long)
            pmask[k, i] = False
            pmask[k, i, W - len(p):] = True
    return ids.to(device), pmask.to(device)


def _prompt_forward(sp: StackedParts, w: dict[str, Any], ids: torch.Tensor, pmask: torch.Tensor,
                    cos_t: torch.Tensor, sin_t: torch.Tensor) -> tuple[torch.Tensor, list[Any]]:
    """Prompts (K, U, W): last-position logits (K, U, V) and each layer's (k, v), (K * U, kv, W, d)."""
    K, U, W = ids.shape
    cos, sin, allowed = _prompt_geometry(pmask.view(K * U, W), cos_t, sin_t)
    kv: list[Any] = []

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        kv.append((k, v))
        return _attend(q, k, v, allowed, sp)

    x = _embed(sp, w, ids)
    for lw in w["layers"]:
        x = _layer(sp, lw, x, cos, sin, attend)
    return _head(sp, w, x[:, :, -1]), kv


def _decode(sp: StackedParts, w: dict[str, Any], tokens: torch.Tensor, positions: torch.Tensor, slot: int,
            keys: list[torch.Tensor], values: list[torch.Tensor], valid: torch.Tensor, cos_t: torch.Tensor,
            sin_t: torch.Tensor) -> torch.Tensor:
    """``lean._decode`` for tokens (K, B): logits (K, B, V); caches and ``valid`` are (K * B, ...)."""
    K, B = tokens.shape
    R = K * B
    pos = positions.reshape(R)
    cos, sin = cos_t[pos][:, None, None], sin_t[pos][:, None, None]
    blocked = ~valid[:, None, None, :]
    layer_i = iter(range(len(w["layers"])))

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        i = next(layer_i)
        kc, vc = keys[i], values[i]
        kc[:, :, slot:slot + 1], vc[:, :, slot:slot + 1] = k, v
        qg = q.reshape(R, sp.kv_heads, sp.groups, sp.head_dim)
        s = (qg @ kc[:, :, :slot + 1].transpose(-1, -2)) * sp.scaling
        s = s.masked_fill(blocked, torch.finfo(s.dtype).min).softmax(dim=-1)
        return (s @ vc[:, :, :slot + 1]).reshape(R, sp.heads, 1, sp.head_dim)

    x = _embed(sp, w, tokens)[:, :, None]
    for lw in w["layers"]:
        x = _layer(sp, lw, x, cos, sin, attend)
    return _head(sp, w, x[:, :, 0])


@torch.no_grad()
def generate_many(sp: StackedParts, samplers: Sequence[LeanSampler], prompts: Sequence[Sequence[Sequence[int]]],
                  n: int, temperatures: Sequence[float], top_p: float, max_new_tokens: int,
                  seeds: Sequence[int]) -> list[SampleBatch]:
    """``samplers[k].generate(prompts[k], n, temperatures[k], top_p, max_new_tokens, seeds[k])`` for
    every k, in one loop (see the module doc). The samplers give the tokenizer, end-of-sequence
    ids, padding and chunk size (equal across runs)."""
    s0 = samplers[0]
    if any(s.batch_size != s0.batch_size or s.eos != s0.eos or s.pad_id != s0.pad_id for s in samplers):
        raise IsosimError("runs sampled together need one chunk size, end-of-sequence ids and padding")
    device = sp.parts[0].embed.weight.device
    gens = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
    prompts = [[list(p) for p in ps] for ps in prompts]
    chunks = []  # per run: its chunks of request rows (each a list of prompts), in HFSampler's order
    for ps in prompts:
        req = [i for i in range(len(ps)) for _ in range(n)]
        chunks.append([[ps[i] for i in req[a:a + s0.batch_size]] for a in range(0, len(req), s0.batch_size)])
    tokens: list[list[list[int]]] = [[] for _ in prompts]
    logps: list[list[list[float]]] = [[] for _ in prompts]
    weights = sp.weights()
    for j in range(max(len(c) for c in chunks)):
        runs = [k for k in range(len(prompts)) if j < len(chunks[k])]
        w = weights if len(runs) == sp.K else _subset(weights, runs)
        toks, lps = _chunk_many(sp, w, [chunks[k][j] for k in runs], [gens[k] for k in runs],
                                [float(temperatures[k]) for k in runs], top_p, max_new_tokens, s0.pad_id, s0.eos,
                                device)
        for k, t, lp in zip(runs, toks, lps):
            tokens[k].extend(t)
            logps[k].extend(lp)
    out = []
    eos = set(s0.eos)
    for k, ps in enumerate(prompts):
        b = SampleBatch()
        rows = [i for i in range(len(ps)) for _ in range(n)]
        for i, row, lp in zip(rows, tokens[k], logps[k]):
            b.add(ps[i], row, lp, eos)
        b.texts = samplers[k].tokenizer.batch_decode(b.completion_ids, skip_special_tokens=True)
        out.append(b)
    return out


def _subset(w: dict[str, Any], runs: list[int]) -> dict[str, Any]:
    idx = torch.tensor(runs, dtype=torch.long, device=w["embed"].device)

    def pick(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.index_select(0, idx)
        if isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], float):
            return tuple(pick(v) if v is not None else None for v in x)
        return x

    return {"layers": [{k: pick(v) for k, v in lw.items()} for lw in w["layers"]],
            **{k: pick(w[k]) for k in ("embed", "norm", "head")}}


def _chunk_many(sp: StackedParts, w: dict[str, Any], chunks: list[list[list[int]]], gens: list[torch.Generator],
                temps: list[float], top_p: float, max_new: int, pad_id: int, eos_ids: list[int], device: Any
                ) -> tuple[list[list[list[int]]], list[list[list[float]]]]:
    """``LeanSampler._chunk`` for one chunk of each of K runs; rows are (K, B) with B the largest
    chunk (a shorter chunk's extra rows start finished and draw no noise)."""
    K, B = len(chunks), max(len(c) for c in chunks)
    sizes = [len(c) for c in chunks]
    uniq: list[list[list[int]]] = []
    group = torch.zeros((K, B), dtype=torch.long)
    for k, chunk in enumerate(chunks):
        u: list[list[int]] = []
        for r, p in enumerate(chunk):
            if not u or u[-1] is not p:
                u.append(p)
            group[k, r] = len(u) - 1
        uniq.append(u)
    ids, pmask = _prompts(uniq, pad_id, device)
    U, W = ids.shape[1], ids.shape[2]
    cos_t, sin_t = sp.rope_table(W + max_new, w["embed"])
    logits_u, kv = _prompt_forward(sp, w, ids, pmask, cos_t, sin_t)
    g = (group.to(device) + torch.arange(K, device=device)[:, None] * U).view(-1)  # (K * B) into (K * U)
    keys, values = [], []
    for k_, v_ in kv:
        kc = k_.new_zeros((K * B, sp.kv_heads, W + max_new, sp.head_dim))
        vc = torch.zeros_like(kc)
        kc[:, :, :W], vc[:, :, :W] = k_.index_select(0, g), v_.index_select(0, g)
        keys.append(kc)
        values.append(vc)
    logits = logits_u.reshape(K * U, -1).index_select(0, g).view(K, B, -1)
    valid = torch.zeros((K * B, W + max_new), dtype=torch.bool, device=device)
    valid[:, :W] = pmask.view(K * U, W).index_select(0, g)
    plen = pmask.view(K * U, W).sum(1).index_select(0, g).view(K, B)
    rows = torch.arange(B, device=device).repeat(K, 1)  # (K, Bc): request row of each cache row
    V = logits.shape[-1]
    eos = torch.tensor(eos_ids, dtype=torch.long, device=device)
    out_tok = torch.full((K * B, max_new), pad_id, dtype=torch.long, device=device)
    out_lp = torch.zeros((K * B, max_new), dtype=torch.float32, device=device)
    done = torch.arange(B, device=device)[None] >= torch.tensor(sizes, device=device)[:, None]  # (K, Bc)
    drawing = [True] * K  # whether run k's single loop is still running (it draws noise each step)
    temp = torch.tensor(temps, dtype=torch.float32, device=device).view(K, 1, 1)
    warper = None
    if top_p < 1.0:
        from transformers import TopPLogitsWarper

        warper = TopPLogitsWarper(top_p=top_p)
    base = (torch.arange(K, device=device) * B)[:, None]
    compacted = False  # rows is still 0..B-1 in every run
    for t in range(max_new):
        scores = logits.float() / temp
        if warper is not None:
            scores = warper(None, scores.view(-1, V)).view(scores.shape)
        logp = torch.log_softmax(scores, dim=-1)
        probs = torch.softmax(scores, dim=-1)
        noise = torch.ones((K, B, V), dtype=torch.float32, device=device)
        for k in range(K):
            if drawing[k]:
                noise[k, :sizes[k]].exponential_(1, generator=gens[k])
        if compacted:
            noise = noise.gather(1, rows[:, :, None].expand(-1, -1, V))
        tok = (probs / noise).argmax(dim=-1)  # (K, Bc)
        live = ~done
        flat_rows = (rows + base)[live]
        out_tok[flat_rows, t] = tok[live]
        out_lp[flat_rows, t] = logp.gather(-1, tok[:, :, None]).squeeze(-1)[live]
        done = done | torch.isin(tok, eos)
        drawing = (~done.all(dim=1)).tolist()
        if not any(drawing) or t + 1 == max_new:
            break
        Bc = done.shape[1]
        keep_n = int((~done).sum(1).max())
        if Bc - keep_n >= LeanSampler.COMPACT_AT * Bc:  # drop finished rows (each run keeps keep_n)
            order = torch.sort(done.to(torch.int8), dim=1, stable=True).indices[:, :keep_n]  # live rows first
            flat = (order + torch.arange(K, device=device)[:, None] * Bc).view(-1)
            rows, tok, plen, done = (x.gather(1, order) for x in (rows, tok, plen, done))
            compacted = True
            valid = valid.index_select(0, flat)
            keys = [x.index_select(0, flat) for x in keys]
            values = [x.index_select(0, flat) for x in values]
        valid[:, W + t] = True
        logits = _decode(sp, w, tok, plen + t, W + t, keys, values, valid[:, :W + t + 1], cos_t, sin_t)
    out_tok, out_lp = out_tok.view(K, B, max_new), out_lp.view(K, B, max_new)
    return ([out_tok[k, :sizes[k]].tolist() for k in range(K)], [out_lp[k, :sizes[k]].tolist() for k in range(K)])


def response_logprobs_many(sp: StackedParts, w: dict[str, Any], prompts: Sequence[Sequence[Sequence[int]]],
                           responses: Sequence[Sequence[Sequence[int]]], pad_id: int, temperatures: Sequence[float],
                           with_entropy: bool, device: Any = "cpu", bucket_rows: int = 64
                           ) -> list[tuple[Any, Any, Any, Any]]:
    """``lean_forward.response_logprobs`` for K runs: per run ``(logp, entropy, response_ids,
    response_mask)``, each (rows_k, R_k) as the single-run call lays them out."""
    K = len(prompts)
    S = max(len(p) for p in prompts)
    R = max(max((len(r) for rs in responses for r in rs), default=1), 1)
    resp_ids = torch.full((K, S, R), pad_id, dtype=torch.long)
    resp_mask = torch.zeros((K, S, R), dtype=torch.float32)
    uniq, group = [], torch.zeros((K, S), dtype=torch.long)
    for k in range(K):
        index: dict[tuple[int, ...], int] = {}
        for i, (p, r) in enumerate(zip(prompts[k], responses[k])):
            group[k, i] = index.setdefault(tuple(p), len(index))
            if len(r):
                resp_ids[k, i, :len(r)] = torch.tensor(list(r), dtype=torch.long)
                resp_mask[k, i, :len(r)] = 1.0
        uniq.append(list(index))
    resp_ids, resp_mask = resp_ids.to(device), resp_mask.to(device)
    ids, pmask = _prompts(uniq, pad_id, device)
    U, W = ids.shape[1], ids.shape[2]
    cos_t, sin_t = sp.rope_table(W + R, w["embed"])
    first, pkv = _prompt_forward(sp, w, ids, pmask, cos_t, sin_t)  # (K, U, V): predicts response token 0
    g_all = (group.to(device) + torch.arange(K, device=device)[:, None] * U)  # (K, S) into (K * U)
    flat_mask = pmask.view(K * U, W)
    plen_all = flat_mask.sum(1)
    lengths = (resp_mask.sum(2)).long()  # (K, S)
    logp = resp_mask.new_zeros((K, S, R))
    ent = resp_mask.new_zeros((K, S, R)) if with_entropy else None
    for rows in _slabs(lengths, bucket_rows):  # (K, s): rows of similar length, each run alike
        s = rows.shape[1]
        L = max(int(lengths.gather(1, rows).max()), 1)
        g = g_all.gather(1, rows).view(-1)
        logits = first.reshape(K * U, -1).index_select(0, g).view(K, s, 1, -1)
        targets = resp_ids.gather(1, rows[:, :, None].expand(K, s, R))[:, :, :L]
        if L > 1:
            pos = plen_all.index_select(0, g)[:, None] + torch.arange(L - 1, device=device)[None]
            cos, sin = cos_t[pos][:, None], sin_t[pos][:, None]
            allowed = torch.cat([flat_mask.index_select(0, g)[:, None, None, :].expand(K * s, 1, L - 1, W),
                                 torch.tril(torch.ones(L - 1, L - 1, dtype=torch.bool, device=device))
                                 .expand(K * s, 1, L - 1, L - 1)], dim=-1)
            layer_kv = iter(pkv)

            def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
                k0, v0 = next(layer_kv)
                return _attend(q, torch.cat([k0.index_select(0, g), k], dim=2),
                               torch.cat([v0.index_select(0, g), v], dim=2), allowed, sp)

            x = _embed(sp, w, targets[:, :, :L - 1])
            for lw in w["layers"]:
                x = _layer(sp, lw, x, cos, sin, attend)
            logits = torch.cat([logits, _head(sp, w, x)], dim=2)  # (K, s, L, V)
        if len(set(temperatures)) == 1:
            lp, en = _chunk_logprobs(logits, targets, float(temperatures[0]), with_entropy)
        else:
            parts = [_chunk_logprobs(logits[k], targets[k], float(temperatures[k]), with_entropy) for k in range(K)]
            lp = torch.stack([x[0] for x in parts])
            en = torch.stack([x[1] for x in parts]) if with_entropy else None
        idx = rows[:, :, None].expand(K, s, R)
        logp = logp.scatter(1, idx, torch.nn.functional.pad(lp, (0, R - L)))
        if with_entropy:
            ent = ent.scatter(1, idx, torch.nn.functional.pad(en, (0, R - L)))
    out = []
    for k in range(K):
        s_k = len(prompts[k])
        r_k = max(max((len(r) for r in responses[k]), default=1), 1)
        out.append((logp[k, :s_k, :r_k], ent[k, :s_k, :r_k] if ent is not None else None,
                    resp_ids[k, :s_k, :r_k], resp_mask[k, :s_k, :r_k]))
    return out


def _slabs(lengths: torch.Tensor, bucket_rows: int, waste: float = 0.7) -> list[torch.Tensor]:
    """Row indices (K, s) of each slab: every run's rows sorted by length, longest first, cut where
    a slab of at least ``bucket_rows`` rows in all would otherwise pad a row to more than 1 / waste
    of its length (``lean_forward._buckets`` across K runs)."""
    K, S = lengths.shape
    order = torch.sort(lengths, dim=1, descending=True, stable=True)
    top = order.values.max(dim=0).values.tolist()  # the longest row at each rank over the runs
    per_run = max(1, -(-bucket_rows // K))
    cuts, a = [], 0
    for j in range(1, S + 1):
        if j == S or (j - a >= per_run and top[j] < waste * top[a]):
            cuts.append((a, j))
            a = j
    return [order.indices[:, a:b] for a, b in cuts]
