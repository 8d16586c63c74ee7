"""The packages that make up this dprelease, in execution order: the ONE list a new mechanism is added to.

A package listed here exports ``PLUGIN`` (a :class:`dprelease.mechanism.Mechanism`) from its ``plugin``
module, and may have a ``params`` module whose ``SECTION = (key, Model)`` becomes ``Params.<key>``. A
``params`` module imports pydantic only (``Params`` is assembled from it), and a package's ``__init__``
imports nothing of the project, so reading the sections can never import a stage. The registry loads the
``plugin`` modules (:data:`dprelease.registry.MECHANISMS`). The import-graph analysis reads :data:`PACKAGES`
(:func:`dprelease.code_scope.implicit_imports`), so these imports by name are edges like any other.

Adding a mechanism: write its folder (pure maths, run functions, ``stages.declare``, ``params.py`` with its
section and defaults, ``plugin.py`` with its flow, arms, tracking hook and sanitizer), then add its package
name to :data:`PACKAGES`. Nothing else in the shared code names it.
"""

from __future__ import annotations

import importlib
import importlib.util

PACKAGES = (
    "dprelease.privacy",
    "dprelease.data",
    "dprelease.swag_ppm",
    "dprelease.nonprivate",
    "dprelease.dpsgd",
    "dprelease.reports",
    "dprelease.nvdp",
    "dprelease.mia",  # the audit package: after every arm it audits (its NVDP arm reads NVDP's scores)
    "dprelease.gpp",
)


def sections() -> dict[str, type]:
    """``{key: pydantic model}`` of every package's ``params`` module that declares a ``SECTION``."""
    out: dict[str, type] = {}
    for package in PACKAGES:
        if importlib.util.find_spec(f"{package}.params") is None:
            continue
        key, model = importlib.import_module(f"{package}.params").SECTION
        if key in out:
            raise RuntimeError(f"params section {key!r} declared twice ({package})")
        out[key] = model
    return out
