"""The GPP model (docs/algorithms.md, G.1): a stochastic encoder, softmax heads, the KL term and the encoder loss.

Pure torch; shared by the centralized trainer (Algorithm 1) and the distributed one on Flower
(Algorithm 2, ``gpp.federated``). Arrays in, tensors out; randomness only from explicit generators.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F


def mlp(d_in: int, hidden: Sequence[int], d_out: int) -> nn.Sequential:
    """ReLU MLP ``d_in → hidden… → d_out`` (no activation on the output)."""
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(d_in, h), nn.ReLU()]
        d_in = h
    layers.append(nn.Linear(d_in, d_out))
    return nn.Sequential(*layers)


class Encoder(nn.Module):
    """``T_θ(x) → (μ, log σ²)`` with a diagonal Gaussian (S003 writes a Cholesky factor but uses
    ``L ⊙ ε``). ``deterministic=True`` is the No-Privacy baseline: ``release`` returns μ."""

    def __init__(self, d_in: int, d_z: int, hidden: Sequence[int] = (512, 256), *, deterministic: bool = False):
        super().__init__()
        self.body = mlp(d_in, hidden[:-1], hidden[-1]) if hidden else nn.Identity()
        width = hidden[-1] if hidden else d_in
        self.mu = nn.Linear(width, d_z)
        self.logvar = nn.Linear(width, d_z)
        self.deterministic = deterministic

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.body(x)) if not isinstance(self.body, nn.Identity) else x
        return self.mu(h), self.logvar(h).clamp(-20.0, 10.0)

    def release(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """One sanitized draw per row (G.1 step 2), or μ for the deterministic baseline."""
        mu, logvar = self(x)
        return mu if self.deterministic else reparameterise(mu, logvar, generator)


def reparameterise(mu: torch.Tensor, logvar: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """``z = μ + σ ⊙ ε``, ``ε ~ N(0, I)`` drawn from ``generator`` (differentiable in μ, log σ²)."""
    eps = torch.randn(mu.shape, generator=generator, dtype=mu.dtype, device=mu.device)
    return mu + torch.exp(0.5 * logvar) * eps


def head(d_z: int, n_classes: int, hidden: Sequence[int] = (256, 128)) -> nn.Sequential:
    """A softmax classifier on z: utility head Q_ψ, adversary head Q_φ, or the audit probe (G.2/G.3)."""
    return mlp(d_z, hidden, n_classes)


def kl_term(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``½ Σ_l (μ_l² + σ_l² − log σ_l² − 1)`` (S003 eq. 38), summed over dims, averaged over the batch."""
    return 0.5 * (mu.pow(2) + logvar.exp() - logvar - 1.0).sum(dim=1).mean()


def encoder_loss(
    z: torch.Tensor,
    mu: torch.Tensor,
    logvar: torch.Tensor,
    u: torch.Tensor,
    s: torch.Tensor,
    utility_head: nn.Module,
    adversary_head: nn.Module,
    *,
    beta: float,
    lam: float,
) -> torch.Tensor:
    """``L_θ = β·CE(u, Q_ψ(z)) − CE(s, Q_φ(z)) + λ·L_KL`` (S003 eq. 39, Alg. 1 line 24), batch means.

    The encoder minimises the utility loss and *maximises* the adversary's loss; gradients reach θ
    through ``z`` (the heads' parameters are not stepped by this loss)."""
    return (
        beta * F.cross_entropy(utility_head(z), u) - F.cross_entropy(adversary_head(z), s) + lam * kl_term(mu, logvar)
    )
