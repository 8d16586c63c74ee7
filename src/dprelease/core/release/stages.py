"""The one shared publish step (stage ``publish``): the declared mechanism's staged release (``released.mechanism``,
fixed before the data are seen) → the signed release folder ``params.release`` with its model card, and the
release record ``metrics/released.json`` that the summary, MLflow, the registry's tags and gates read.

A mechanism declares what it releases (:class:`dprelease.contracts.mechanism.ReleaseSpec` on its plug-in): the stage that
stages a release-format folder (model, labels, a manifest holding its guarantee record), its card and its
figures. Nothing here names a mechanism: the stage registry resolves ``released.mechanism`` once
(:func:`dprelease.pipeline.registry.release_spec`) and adds this stage with that spec (:func:`publish_stage`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params
from dprelease.core.io import write_json
from dprelease.core.release.folder import publish as write_published
from dprelease.core.release.folder import verify_release
from dprelease.core.release.path import check_release_path
from dprelease.core.release.signing import agency_signer, public_key_dep

RECORD = "metrics/released.json"  # the release record: mechanism, kind, ε, δ, F1, diagnostics, folder (aggregates)


def publish(params: Params, root: str | Path = ".", *, spec) -> dict:
    """Sign the declared mechanism's staged release (``spec``: its :class:`ReleaseSpec`) into ``params.release``
    and write the release record."""
    s = spec
    lay = Layout.from_params(params, root)
    target = check_release_path(params, root)
    staging = Path(root) / s.staged(params)
    manifest = verify_release(staging)
    card, extra = s.card(params, root, manifest)
    write_published(staging, target, card, signer=agency_signer(params, root), extra=extra)
    fig = s.figures(params, root, manifest)
    g = manifest["guarantee"]
    record = {
        "mechanism": params.released.mechanism,
        "label": g.get("mechanism"),
        "arm": fig.get("arm"),
        "guarantee": g,
        "weighted_f1": fig.get("weighted_f1"),
        "macro_f1": fig.get("macro_f1"),
        "test_f1_kind": (manifest.get("test_f1") or {}).get("kind", "exact"),
        "diagnostics": fig.get("diagnostics", {}),
        "configuration": manifest.get("configuration"),
        "tuning": manifest.get("tuning"),
        "release": params.release,
        "headline": fig.get("headline", {}),
        "tags": fig.get("tags", {}),
        "details": fig.get("details", {}),
    }
    write_json(lay.metrics / "released.json", record)
    return {
        "mechanism": record["mechanism"],
        "kind": g["kind"],
        "epsilon": g.get("epsilon"),
        "weighted_f1": record["weighted_f1"],
        "release": str(lay.release),
    }


def publish_stage(params: Params, spec) -> list[Stage]:
    """The ``publish`` stage of the declared release (``spec``: the :class:`ReleaseSpec` the registry resolved
    ``released.mechanism`` to; exactly one mechanism publishes)."""
    return [
        Stage(
            name="publish",
            run=partial(publish, spec=spec),
            params=["release", "force_release_path", "released", *spec.params],
            deps=[
                spec.staged(params).rsplit("/", 1)[0],
                "metrics/data.json",
                *spec.deps(params),
                public_key_dep(params),
            ],
            evidence=spec.evidence(params),
            outs=[params.release],
            metrics=[RECORD],
            extra_code=spec.code(),
            signs=True,
        )
    ]


def declare(params: Params) -> list[Stage]:
    return []  # the publish stage is added by the registry for the declared release (publish_stage)
