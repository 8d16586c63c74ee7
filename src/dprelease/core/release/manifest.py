"""The one builder of a staged release's manifest: the fields every releasing mechanism's manifest has, filled
once (its guarantee record, its name, the backend, the test F1 it may publish, the randomness: the public seed
and the secret key's id), and the mechanism's own fields beside them (configuration, tuning, coverage,
diagnostics …). A field every release should carry is added here."""

from __future__ import annotations

from dprelease.core.privacy import secret


def release_manifest(params, lay, g, *, mechanism: str, backend: str, test_f1: dict, randomness: dict, **own) -> dict:
    """The manifest of ``mechanism``'s staged release.

    Args:
        params: the run's params (the public seed).
        lay: its layout (the secret key's folder, whose id is recorded, never the key).
        g: the release's guarantee record (:class:`dprelease.core.privacy.guarantee.Guarantee`).
        mechanism: the name ``released.mechanism`` gives it.
        backend: the released model's backend, in words.
        test_f1: the test figures the release may publish (covered by its ε, or exact for a PPM draw).
        randomness: what the public seed and the secret key drive (``public_seed_drives``,
            ``secret_key_drives``, and any further entry of the mechanism's).
        **own: the mechanism's own fields (configuration, tuning, coverage, sampling …).

    Returns:
        The manifest (public fields only), without ``model``, ``files`` and ``code_version``, which
        :func:`dprelease.core.release.folder.write_release` adds.
    """
    return {
        "guarantee": g.as_dict(),
        "mechanism": mechanism,
        "backend": backend,
        "test_f1": test_f1,
        "randomness": {"public_seed": params.seed, **randomness, "secret_key_id": secret.key_id(lay.artifacts)},
        **own,
    }
