"""Problem populations: K candidate responses per problem, some correct, and their features.

One population is drawn per ``data_seed`` from a difficulty profile. Its training problems come
first (rows ``0 .. n_train-1``), validation problems after them; both come from the same profile
(unless ``val_profile`` names another one) and the same skill clusters, so transfer along a cluster's skill direction is what lets training
improve validation.

Base logits. Raw logits are standard normal; the correct responses' logits are then shifted by
one constant per problem so that the base policy's pass@1 equals the profile's draw exactly.

Features (``U``, shape ``[P, K, D]``), each part scaled per run by a strength (``SimConfig``):

==========  =======  ==================================================================
part        dims     meaning
==========  =======  ==================================================================
skill       C        correct responses of a problem in cluster c load ``a_p`` on skill
                     direction c (``a_p`` = 0 for problems that do not transfer); with
                     ``hard_clusters`` h > 0, hard problems (pass@1 < 1/16) sit in the
                     last h clusters and all others in the rest
typicality  1        the standardised base logit of each response: raising it sharpens
                     every problem towards its base mode and erodes rare correct answers
memorize    mem_dim  Gaussian, independent per (problem, response): problem-specific
                     directions through which updates on one problem move all others
==========  =======  ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from isosim.sim.config import SimConfig
from isosim.sim.profiles import HARD_P, get_profile  # noqa: F401  (HARD_P: hard for ``hard_loading``)


@dataclass
class Population:
    """Tensors of one population (or several stacked on a leading axis by :func:`stack`)."""

    p0: torch.Tensor  # [P] base pass@1 (the profile's draw, clipped)
    z0: torch.Tensor  # [P, K] base logits
    correct: torch.Tensor  # [P, K] 1.0 for correct responses
    U: torch.Tensor  # [P, K, D] features
    emb: torch.Tensor  # [P, E] problem embeddings (mlp policy)
    length: torch.Tensor  # [P, K] response lengths in tokens (NaN when no length model)
    n_train: int
    clusters: int
    mem_dim: int

    @property
    def dims(self) -> dict[str, slice]:
        """Where each feature part sits along D."""
        c = self.clusters
        return {"skill": slice(0, c), "typicality": slice(c, c + 1), "memorize": slice(c + 1, c + 1 + self.mem_dim)}


def base_logits(raw: np.ndarray, correct: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Shift correct responses' logits so that sum of softmax over them equals ``p`` exactly."""
    w = np.exp(raw - raw.max(axis=1, keepdims=True))
    s_c = (w * correct).sum(axis=1)
    s_w = (w * (1 - correct)).sum(axis=1)
    delta = np.log(p) + np.log(s_w) - np.log1p(-p) - np.log(s_c)
    return raw + correct * delta[:, None]


def build(cfg: SimConfig, *, device: str | torch.device = "cpu", dtype=torch.float64,
          memorize: bool = True) -> Population:
    """Draw the population fixed by ``cfg.population_key`` (seeded by its data seed).

    The problem-specific features come from a stream of their own, so ``memorize=False`` (leave
    them zero: no run uses them) saves time without changing any other draw.
    """
    data_seed = cfg.data_seed if cfg.data_seed is not None else cfg.seed
    rng = np.random.default_rng(np.random.SeedSequence([data_seed, 0x150_5EED]))
    mem_rng = np.random.default_rng(np.random.SeedSequence([data_seed, 0x3E3_0]))
    P, K = cfg.n_train + cfg.n_val, cfg.responses
    if cfg.val_profile is None:
        p = get_profile(cfg.profile).sample(P, rng)
    else:  # validation pass rates from a stream of their own: training problems do not depend on it
        val_rng = np.random.default_rng(np.random.SeedSequence([data_seed, 0x7A1]))
        p = np.concatenate([get_profile(cfg.profile).sample(cfg.n_train, rng),
                            get_profile(cfg.val_profile).sample(cfg.n_val, val_rng)])

    m = rng.integers(cfg.correct_min, cfg.correct_max + 1, size=P)
    rank = rng.random((P, K)).argsort(axis=1).argsort(axis=1)  # a random order per problem
    correct = (rank < m[:, None]).astype(float)  # m correct responses at random positions
    raw = rng.standard_normal((P, K))
    z0 = base_logits(raw, correct, p)

    cluster = rng.integers(0, cfg.clusters, size=P)
    if cfg.hard_clusters:  # hard problems on clusters of their own (no other draw changes)
        h = cfg.hard_clusters
        cluster = np.where(p < HARD_P, cfg.clusters - h + cluster % h, cluster % (cfg.clusters - h))
    transfers = rng.random(P) < cfg.transfer_frac
    if cfg.loading_dist == "loguniform":  # the same number of draws: no other draw changes
        drawn = np.exp(rng.uniform(np.log(cfg.loading_lo), np.log(cfg.loading_hi), P))
    else:
        drawn = rng.uniform(cfg.loading_lo, cfg.loading_hi, P)
    loading = np.where(transfers, drawn, 0.0)
    loading = np.where(p < HARD_P, loading * cfg.hard_loading, loading)

    mem_dim = cfg.mem_dim if memorize else 0
    U = np.zeros((P, K, cfg.clusters + 1 + mem_dim))
    U[np.arange(P), :, cluster] = loading[:, None] * correct
    typ = (z0 - z0.mean(axis=1, keepdims=True)) / (z0.std(axis=1, keepdims=True) + 1e-12)
    U[:, :, cfg.clusters] = typ
    if mem_dim:
        U[:, :, cfg.clusters + 1:] = mem_rng.standard_normal((P, K, cfg.mem_dim)) / np.sqrt(cfg.mem_dim)

    emb = np.concatenate([np.eye(cfg.clusters)[cluster], 0.3 * rng.standard_normal((P, 8))], axis=1)
    if cfg.mean_len is not None:
        length = np.round(cfg.mean_len * rng.lognormal(-0.125, 0.5, size=(P, K))).clip(1, None)
    else:
        length = np.full((P, K), np.nan)

    t = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
    return Population(t(p), t(z0), t(correct), t(U), t(emb), t(length), cfg.n_train, cfg.clusters, mem_dim)


def stack(pops: list[Population]) -> Population:
    """Stack populations of equal shapes on a new leading axis."""
    first = pops[0]
    return Population(
        *(torch.stack([getattr(q, f) for q in pops]) for f in ("p0", "z0", "correct", "U", "emb", "length")),
        n_train=first.n_train, clusters=first.clusters, mem_dim=first.mem_dim,
    )
