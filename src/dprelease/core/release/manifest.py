"""The one builder of a staged release's manifest: the fields every releasing mechanism's manifest has, filled
once (its guarantee record, its name, the backend, the test F1 it may publish, the randomness: the public seed
and the secret key's id), and the mechanism's own fields beside them (configuration, tuning, coverage,
diagnostics …). A field every release should carry is added here. :func:`stage_release` writes the staged
(private, unsigned) folder and the operator's exact figures beside it, as the Gaussian-counts releases do."""

from __future__ import annotations

from pathlib import Path

from dprelease.core.io import write_json
from dprelease.core.privacy import secret
from dprelease.core.release.folder import write_release

NOISED = "dp_noised_counts"  # test figures from Gaussian-noised counts, covered by the release's ε
INTERNAL_NOTE = "un-noised figures on private test reports: internal, never released"


def release_manifest(
    params, lay, g, /, *, mechanism: str, backend: str, test_f1: dict | None, randomness: dict, **own
) -> dict:
    """The public manifest of a staged release (``write_release`` adds ``model``, ``files`` and ``code_version``).

    Args:
        params: the run's params (the public seed).
        lay: its layout (the secret key's folder, whose id is recorded, never the key).
        g: the release's guarantee record (:class:`dprelease.core.privacy.guarantee.Guarantee`).
        mechanism: the name ``released.mechanism`` gives it.
        backend: the released model's backend, in words.
        test_f1: the test figures the release may publish; None when measured after staging (then no ``test_f1``).
        randomness: what the public seed and the secret key drive (``public_seed_drives``, ``secret_key_drives`` …).
        **own: the mechanism's own fields (any name, ``g`` included: see docs/release.md, "Notes from the code",
            `core/release/manifest.py`)."""
    common = {
        "guarantee": g.as_dict(),
        "mechanism": mechanism,
        "backend": backend,
        "randomness": {"public_seed": params.seed, **randomness, "secret_key_id": secret.key_id(lay.artifacts)},
    }
    if test_f1 is not None:
        common["test_f1"] = test_f1
    return common | own


def noised(covered: dict) -> dict:
    """Test figures from Gaussian-noised counts (:func:`dprelease.core.utility.dp_eval.dp_scores`), marked so."""
    return {**covered, "kind": NOISED}


def stage_release(
    folder: Path, backend, model, labels: dict, manifest: dict, code: list[str], *, exact: dict, **internal
) -> None:
    """Write the staged release ``folder`` (private, unsigned: the publish step signs it) and ``internal.json``.

    Args:
        folder: the staged release folder (``<artifacts>/<mechanism's folder>/release``).
        backend: the released model's backend object (writes the model).
        model: the released model.
        labels: the label map (``codes``, ``titles``).
        manifest: :func:`release_manifest`'s manifest.
        code: the code that made the release (hashed into ``code_version``).
        exact: the operator's un-noised test figures (``exact_test_f1`` of ``internal.json``: private, never released).
        **internal: further private entries of ``internal.json``.
    """
    write_release(folder, backend, model, labels["codes"], labels["titles"], manifest, code, private=True)
    write_json(
        Path(folder).parent / "internal.json",
        {"exact_test_f1": exact, **internal, "note": INTERNAL_NOTE},
        private=True,
    )
