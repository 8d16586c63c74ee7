"""The packages that make up this dprelease, in execution order (:data:`PACKAGES`, kept in
:mod:`dprelease.contracts.packages`: the ONE list a new mechanism is added to), and what is read from them.

Each exports ``PLUGIN`` from its ``plugin`` module and may have a ``params`` module (``SECTION``, ``ARMS`` …; it imports
pydantic, the contracts and the accountant registry only) and a ``kinds`` module (``KINDS``; the contracts and the
core's kinds only), so reading them never imports a stage. A stage's code scope leaves this module's edges to them out
unless its code reads their arms, frontier sources or guarantee kinds
(:func:`dprelease.contracts.code_scope.scope_imports`).

See docs/architecture.md, "Notes from the code", `contracts/plugins.py` (adding a mechanism, the plug-in index)."""

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
    (:data:`dprelease.contracts.code_scope.DECLARATION_READERS`), so no other package's ``params`` module is in its
    scope.

    Args:
        audited: only the arms that take part in the membership audit (``Arm.audited``).

    Returns:
        The arms' names.
    """
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
    a function of ``Params``), in :data:`PACKAGES` order: what ``dprelease key rotate`` re-signs.

    Args:
        params: the validated ``Params`` each ``SIGNED`` is called with.

    Returns:
        The folders, relative to the project root.
    """
    return [folder for module in _params_modules() for folder in getattr(module, "SIGNED", lambda params: [])(params)]


def overridden(params) -> dict[str, str]:
    """The settings a declared choice of the released mechanism (``released.mechanism``) replaces, from its ``params``
    module's ``OVERRIDDEN``; a ``--set`` of one changes nothing released, so the release flow refuses it as inert.

    Args:
        params: the validated ``Params`` (its ``released.mechanism``; ``OVERRIDDEN`` is called with it).

    Returns:
        ``{dotted key: what sets it instead}``; empty when the released mechanism declares no ``OVERRIDDEN``.
    """
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
