"""The packages that make up this dprelease, in execution order (:data:`PACKAGES`, kept in :mod:`dprelease.contracts.packages`:
the ONE list a new mechanism is added to), and what is read from them.

A package listed here exports ``PLUGIN`` (a :class:`dprelease.contracts.mechanism.Mechanism`) from its ``plugin``
module, and may have a ``params`` module whose ``SECTION = (key, Model)`` becomes ``Params.<key>`` and whose
``ARMS`` (:class:`dprelease.contracts.mechanism.Arm`) become names ``compare.arms`` and ``privacy_audit.arms`` accept.
A ``params`` module imports pydantic, :mod:`dprelease.contracts.mechanism` and the accountant registry only (``Params`` is assembled from it),
and a package's ``__init__`` imports nothing of the project, so reading them can never import a stage. A package
may have a ``kinds`` module whose ``KINDS`` (:class:`dprelease.contracts.mechanism.Kind`) are the guarantee kinds only it
makes (:func:`guarantee_kinds`; imports :mod:`dprelease.contracts.mechanism` and :mod:`dprelease.core.privacy.kinds` only). The registry loads the
``plugin`` modules, each on first use (:func:`dprelease.pipeline.registry.plugin`). The import-graph analysis reads :data:`PACKAGES`
(:func:`dprelease.contracts.code_scope.implicit_imports`), so these imports by name are edges like any other; a stage's
code scope leaves this module's edges to the ``params`` and ``kinds`` modules out (a stage's key hashes the validated values it
reads) unless its code reads their arms, frontier sources or guarantee kinds (:func:`arms`, :func:`frontier_sources`,
:func:`guarantee_kinds`: :func:`dprelease.contracts.code_scope.scope_imports`).

Adding a mechanism: write its folder (pure maths, run functions, ``stages.declare``, ``params.py`` with its
section, defaults and arms, ``plugin.py`` with its flow, tracking hook and sanitizer, ``kinds.py`` if it makes a
kind of claim no other mechanism makes), then add its package name to :data:`PACKAGES` (``packages.py``) and its
section to ``params.yaml``. Nothing else in the shared code names it. ``dprelease plugin-index`` then records its stages and
flows in its own fragment of the plug-in index (``<package>/plugin_index.json``), so ``dprelease stage NAME``
imports its package alone (until then every plug-in is imported to find them; a test says when the index is out
of date).
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache

from dprelease.contracts.packages import PACKAGES  # the list itself: configuration, in its own module (packages.py)


@cache
def _params_modules() -> tuple:
    """The listed packages' ``params`` modules (found once per process: flows ask for the arms per stage)."""
    return tuple(
        importlib.import_module(f"{package}.params")
        for package in PACKAGES
        if importlib.util.find_spec(f"{package}.params") is not None
    )


def sections() -> dict[str, type]:
    """``{key: pydantic model}`` of every package's ``params`` module: its ``SECTION`` (one ``(key, model)``) or
    its ``SECTIONS`` (several)."""
    out: dict[str, type] = {}
    for module in _params_modules():
        declared = ((module.SECTION,) if hasattr(module, "SECTION") else ()) + tuple(getattr(module, "SECTIONS", ()))
        for key, model in declared:
            if key in out:
                raise RuntimeError(f"params section {key!r} declared twice ({module.__name__.rsplit('.', 1)[0]})")
            out[key] = model
    return out


def checks() -> list:
    """Every package's ``CHECKS``: functions of the whole validated ``Params`` returning a one-line refusal or None,
    run when params are parsed (a level a worst-case claim needs, when one of the package's arms is listed). A
    check only refuses: it never changes a value, so, like the schema, it is in no stage's code scope."""
    return [check for module in _params_modules() for check in getattr(module, "CHECKS", ())]


def moved() -> dict[str, tuple[str, str]]:
    """``{old dotted key: (new dotted key, what it is)}`` of every package's ``MOVED``: an older params.yaml gets the
    new place in one line, not "unknown key"."""
    return {old: new for module in _params_modules() for old, new in getattr(module, "MOVED", {}).items()}


def arms() -> dict:
    """``{name: Arm}`` of every package's ``ARMS``, in :data:`PACKAGES` order (the default order of the arms)."""
    out: dict = {}
    for module in _params_modules():
        for arm in getattr(module, "ARMS", ()):
            if arm.name in out:
                raise RuntimeError(f"arm {arm.name!r} declared twice ({module.__name__})")
            out[arm.name] = arm
    return out


def arm_names(*, audited: bool = False) -> list[str]:
    """The names ``compare.arms`` (``audited``: ``privacy_audit.arms``) accept, in :data:`PACKAGES` order: the
    schema only. A module that calls this and not :func:`arms` reads no declaration beyond the validated values
    (:data:`dprelease.contracts.code_scope.DECLARATION_READERS`), so no other package's ``params`` module is in its scope."""
    return [name for name, arm in arms().items() if arm.audited or not audited]


def frontier_sources() -> dict[str, str]:
    """``{source: stage}`` of every package whose ``params`` module declares ``FRONTIER`` (the stage writing its
    points, :mod:`dprelease.core.utility.points`); the source is the package's short name, in :data:`PACKAGES` order."""
    return {
        module.__name__.split(".")[-2]: module.FRONTIER for module in _params_modules() if hasattr(module, "FRONTIER")
    }


def results_sections() -> list:
    """Every ``RESULTS_SECTION`` of a ``params`` module (:class:`dprelease.contracts.mechanism.ResultsSection`), in
    :data:`PACKAGES` order: the packages' own sections of ``docs/results.md``."""
    return [module.RESULTS_SECTION for module in _params_modules() if hasattr(module, "RESULTS_SECTION")]


def signed_folders(params) -> list[str]:
    """The root-relative folders the listed packages sign besides the release (``SIGNED`` of a ``params`` module:
    a function of ``Params``), in :data:`PACKAGES` order: what ``dprelease key rotate`` re-signs."""
    return [folder for module in _params_modules() for folder in getattr(module, "SIGNED", lambda params: [])(params)]


def overridden(params) -> dict[str, str]:
    """``{dotted key: what sets it instead}``: the settings a declared choice of the released mechanism
    (``released.mechanism``) replaces, from its ``params`` module's ``OVERRIDDEN`` (a function of ``Params``); a
    ``--set`` of one changes nothing released, so the release flow refuses it as inert."""
    for module in _params_modules():
        if module.__name__.split(".")[-2] == params.released.mechanism and hasattr(module, "OVERRIDDEN"):
            return module.OVERRIDDEN(params)
    return {}


def guarantee_kinds() -> list:
    """Every listed package's guarantee kinds (``KINDS`` of its ``kinds`` module, if it has one), in
    :data:`PACKAGES` order; what :func:`dprelease.core.privacy.guarantee.kind` looks a name up in."""
    return [
        k
        for package in PACKAGES
        if importlib.util.find_spec(f"{package}.kinds") is not None
        for k in importlib.import_module(f"{package}.kinds").KINDS
    ]
