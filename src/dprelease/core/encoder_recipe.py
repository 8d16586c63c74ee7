"""The shipped public encoder's record, read without torch: where its fine-tuned layers are, what made them
(``recipe.json``), what a release and its card say about them, and the period check (docs/encoder.md). The recipe
itself is :mod:`dprelease.core.backends.public_encoder`."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

RESOURCE = Path(__file__).resolve().parent / "resources" / "public_encoder"
WEIGHTS = RESOURCE / "layers.safetensors"  # the changed layers, fp16, under minilm's parameter names
RECIPE = RESOURCE / "recipe.json"  # how they were made: the recipe, the public corpus, the slice check, timings


@lru_cache(maxsize=1)
def recipe() -> dict:
    """The shipped recipe.json (a one-line error when the package lacks it)."""
    if not RECIPE.is_file() or not WEIGHTS.is_file():
        raise FileNotFoundError(
            f"the public encoder is missing from the package ({RESOURCE.name}/): reinstall, or "
            f"set features.encoder: pretrained"
        )
    return json.loads(RECIPE.read_text(encoding="utf-8"))


def reference() -> dict:
    """What a release records about the public fine-tune (public facts: the corpus is the published period)."""
    r = recipe()
    return {"weights_sha256": r["weights_sha256"], "layers": r["changed_layers"], "corpus": r["corpus"]["what"]}


def describe() -> str:
    """The card's words for the encoder: which public data shaped it."""
    r = recipe()
    c = r["corpus"]
    return (
        f"the MiniLM encoder (all-MiniLM-L6-v2) with its top {len(r['changed_layers'])} layers fine-tuned, "
        f"without privacy, on {c['reports']} public reports dated up to {c['until']} ({c['classes']} codes; "
        f"docs/encoder.md)"
    )


def check_period(until: str, *, source: str = "params.yaml") -> None:
    """Refuse a configuration whose private period would include a report the public encoder trained on."""
    trained = recipe()["corpus"]["until"]
    if str(until) < trained:
        raise ValueError(
            f"{source}: proxy.until {until} is before {trained}, the last day of the reports the public "
            f"encoder (features.encoder: public_tuned) was fine-tuned on: those would be private; set "
            f"features.encoder: pretrained, or re-run scripts/public_encoder.py on this public period"
        )


FEATURES = RESOURCE / "public_features.safetensors"  # the public period's embeddings by the tuned encoder (fp16)
