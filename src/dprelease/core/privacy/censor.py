"""Censoring of a record's weighted loss for the strict PPM variant (docs/guarantees.md, P; docs/algorithms.md, B.8).

Any per-record log-likelihood contribution confined to [−κ, 0] changes the log-likelihood of a database
by at most κ when one record is added or removed, so an exact posterior draw is 2κ-DP on every
database; κ = ε/2. Two forms of confinement:

* ``hard``: min(w·CE, κ) — the paper's censoring. Its gradient is zero wherever w·CE > κ; a classifier
  starting near log(C) (4.68 for 108 classes) above κ then sees no gradient from most records.
* ``soft``: κ·tanh(w·CE/κ) — the same range [0, κ) and the same bound, but smooth and strictly
  increasing, so every record keeps a (shrinking) gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Censor:
    level: float  # κ = ε/2
    form: str = "hard"

    def __post_init__(self) -> None:
        if not self.level > 0:
            raise ValueError("censoring level must be positive")
        if self.form not in ("hard", "soft"):
            raise ValueError(f"unknown censoring form {self.form!r} (hard | soft)")

    def torch(self, loss: torch.Tensor) -> torch.Tensor:
        """The censored losses, in torch (hard: min(loss, level); soft: level·tanh(loss/level)).

        Args:
            loss: per-record losses.

        Returns:
            The censored losses, each below the level."""
        if self.form == "hard":
            return loss.clamp(max=self.level)
        return self.level * torch.tanh(loss / self.level)

    def numpy(self, loss: np.ndarray) -> np.ndarray:
        """The censored losses, in numpy (float64 for the soft form); the same function as :meth:`torch`.

        Args:
            loss: per-record losses.

        Returns:
            The censored losses, each below the level."""
        if self.form == "hard":
            return np.minimum(loss, self.level)
        return self.level * np.tanh(np.asarray(loss, dtype=np.float64) / self.level)
