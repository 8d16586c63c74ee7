"""Where every stage reads and writes (one place, shared by stages, the Prefect flow and dvc.yaml).

``artifacts/`` holds private intermediate artifacts (narratives, embeddings, SWAG moments, risks,
weights); ``metrics/``, ``plots/`` and ``reports/`` hold aggregates; ``release/`` is what is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    artifacts: Path
    release: Path
    metrics: Path = Path("metrics")
    plots: Path = Path("plots")
    reports: Path = Path("reports")

    @classmethod
    def from_params(cls, params, root: str | Path = ".") -> "Layout":
        """The layout of a project root from its params.

        Args:
            params: the parsed params (its ``artifacts`` and ``release`` folders are read).
            root: the project root the folders are relative to.

        Returns:
            The layout, every folder under ``root``."""
        root = Path(root)
        return cls(
            artifacts=root / params.artifacts,
            release=root / params.release,
            metrics=root / "metrics",
            plots=root / "plots",
            reports=root / "reports",
        )

    # data ------------------------------------------------------------------------------------
    @property
    def data(self) -> Path:
        return self.artifacts / "data"

    @property
    def features(self) -> Path:
        return self.artifacts / "features"

    # rounds ----------------------------------------------------------------------------------
    def round(self, r: int) -> Path:
        """The folder of SWAG-PPM's round ``r``.

        Args:
            r: the round (1, 2 or 3).

        Returns:
            ``<artifacts>/round<r>``."""
        return self.artifacts / f"round{r}"

    def finetune(self, r: int) -> Path:
        """The fine-tuned model of round ``r``.

        Args:
            r: the round.

        Returns:
            ``<artifacts>/round<r>/finetune``."""
        return self.round(r) / "finetune"

    def swag(self, r: int) -> Path:
        """The SWAG posterior of round ``r``.

        Args:
            r: the round.

        Returns:
            ``<artifacts>/round<r>/swag``."""
        return self.round(r) / "swag"

    def weights(self, r: int) -> Path:
        """Weights used by round r (round 1 is unweighted and has none).

        Args:
            r: the round.

        Returns:
            ``<artifacts>/round<r>/weights``."""
        return self.round(r) / "weights"

    def sensitivity(self, r: int) -> Path:
        """The sensitivity pass (Δ̂ and per-record maxima) of round ``r``.

        Args:
            r: the round.

        Returns:
            ``<artifacts>/round<r>/sensitivity``."""
        return self.round(r) / "sensitivity"

    @property
    def evaluation(self) -> Path:
        """The utility evaluation's per-class F1 and quartile tables of the release."""
        return self.reports / "release"

    @property
    def draw(self) -> Path:
        return self.artifacts / "draw"
