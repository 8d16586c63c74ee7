"""The release as an MLflow model: a pyfunc wrapper over :class:`dprelease.core.release.folder.Coder` (the same code as
``dprelease predict``) that checks the release's signature and files when it loads.

See docs/mlflow.md, "Notes from the code", `pipeline/service/pyfunc_model.py`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import mlflow.pyfunc
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.types import ColSpec, Schema

from dprelease.core.errors import OneLineError, ReleaseError
from dprelease.core.release.folder import NARRATIVE_COLUMNS, Coder
from dprelease.core.release.signing import KEY_ENV, NO_CHECK_ENV, SignatureError, key_from_env, missing_key, opted_out

ARTIFACT = "release"
KEY_ARTIFACT = "agency_key"  # the agency's public key, logged with the model (checks integrity, not authenticity)
INPUT_COLUMNS = ("narrative", *(c for c in NARRATIVE_COLUMNS if c != "narrative"))
SIGNATURE = ModelSignature(
    inputs=Schema([ColSpec("string", c, required=False) for c in INPUT_COLUMNS]),
    outputs=Schema([ColSpec("string", "code"), ColSpec("string", "title"), ColSpec("double", "probability")]),
)


def narratives(model_input) -> list[str]:
    """The narratives of a pyfunc input, or a one-line :class:`ReleaseError`."""
    if isinstance(model_input, pd.DataFrame):
        # a named column with a value first: MLflow may add the optional ones the caller left out, empty
        columns = sorted(
            (c for c in INPUT_COLUMNS if c in model_input.columns), key=lambda c: model_input[c].isna().all()
        )
        if not columns and len(model_input.columns) != 1:
            raise ReleaseError(
                f"no narrative column (looked for {', '.join(INPUT_COLUMNS)}; found "
                f"{', '.join(map(str, model_input.columns))})"
            )
        model_input = model_input[columns[0] if columns else model_input.columns[0]]
    texts = [str(t).strip() if t is not None and t == t else "" for t in list(model_input)]
    empty = [i + 1 for i, t in enumerate(texts) if not t]
    if empty:
        raise ReleaseError(f"empty narrative in row(s) {', '.join(map(str, empty[:5]))}")
    return texts


class ModelSignatureError(SignatureError):
    """The model's release is not loaded: its signature failed the check, or there was no agency key to
    check it with (one line, naming the key used and how to give one)."""


SHIPPED = (
    f"checked with the key logged with the model: integrity, not authenticity; set {KEY_ENV} to the "
    "agency's agency.pub to pin it"
)


def release_key(artifacts: dict) -> tuple[str | None, bool, bool]:
    """(public key, whether to check the signature, whether the key is the model's own) for a model's
    artifacts: ``DPRELEASE_AGENCY_KEY``, else the model's ``agency_key``; ``DPRELEASE_NO_SIGNATURE_CHECK=1``
    skips the check (a warning line on stderr every time); no key at all is a :class:`ModelSignatureError`."""
    if opted_out(os.environ.get(NO_CHECK_ENV)):
        print(
            f"dprelease: warning: {NO_CHECK_ENV} is set: the MLflow model's release is loaded WITHOUT checking "
            "who signed it",
            file=sys.stderr,
            flush=True,
        )
        return None, False, False
    pinned, shipped = key_from_env(), artifacts.get(KEY_ARTIFACT)
    if pinned is None and shipped is None:
        err = missing_key(
            f"MLflow model release {artifacts.get(ARTIFACT)}",
            how=f"set {KEY_ENV}=/path/to/agency.pub",
            opt_out=f"{NO_CHECK_ENV}=1",
        )
        raise ModelSignatureError(str(err))
    return (pinned, True, False) if pinned else (str(shipped), True, True)


def load_release(artifacts: dict, device: str = "cpu") -> Coder:
    """The model's release, signature checked (:func:`release_key`), as a :class:`Coder`; a failed check is a
    one-line :class:`ModelSignatureError`, never a traceback through the signature library."""
    key, check, shipped = release_key(artifacts)
    try:
        return Coder(artifacts[ARTIFACT], device=device, key=key, signature_check=check)
    except SignatureError as err:
        raise ModelSignatureError(
            f"the MLflow model's release does not load: {err}"
            + (f" ({SHIPPED})" if shipped else f" (key from {KEY_ENV})")
        ) from None


class AutocoderModel(mlflow.pyfunc.PythonModel):
    """Loads the release folder once (its signature checked first); ``predict`` codes narratives on the CPU."""

    def load_context(self, context) -> None:
        self._coder = load_release(context.artifacts)

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        try:
            texts = narratives(model_input)
        except ReleaseError as err:  # the caller's input: a 400 with this line, not a 500 with a trace
            raise MlflowException(str(err), error_code=INVALID_PARAMETER_VALUE) from None
        return self._coder(texts)


# `make serve-model`'s check before the scoring server starts ------------------------------------------------------
RETRAIN_FIRST = (
    "register one first: `make retrain SNAPSHOT=extract.csv` (or `make simulate`, or `make serve` then "
    "`make serve-trigger`), then `make serve-model` again"
)


def _registered(client, model_uri: str):
    """The model version ``models:/NAME@ALIAS`` (or ``models:/NAME/VERSION``) names, or a one-line error."""
    from mlflow.exceptions import MlflowException

    ref = model_uri.removeprefix("models:/")
    by_alias = "@" in ref
    name, _, alias = ref.partition("@") if by_alias else ref.rpartition("/")
    if ref == model_uri or not name or not alias:
        raise ReleaseError(f"{model_uri}: not a registered model URI (models:/NAME@ALIAS or models:/NAME/VERSION)")
    try:
        client.get_registered_model(name)
    except MlflowException:
        raise ReleaseError(
            f"no registered model {name!r} in the MLflow store {mlflow.get_tracking_uri()}: {RETRAIN_FIRST}"
        ) from None
    try:
        if by_alias:
            return client.get_model_version_by_alias(name, alias)
        return client.get_model_version(name, alias)
    except MlflowException:
        versions = sorted(int(v.version) for v in client.search_model_versions(f"name = '{name}'"))
        raise ReleaseError(
            f"{model_uri}: {name!r} has no version {alias!r} (registered: "
            f"{', '.join(map(str, versions)) or 'none'}; a version the gates refused is not "
            f"'production'): retrain, or serve a version by its number"
        ) from None


def serve_check(model_uri: str) -> str:
    """Before serving ``model_uri``: the registry holds it, and its release passes the check loading will
    run (signature with :func:`release_key`'s key, then the files). Returns a one-line summary; every
    problem is a one-line :class:`~dprelease.core.errors.OneLineError`."""
    import tempfile

    import yaml
    from mlflow.artifacts import download_artifacts

    from dprelease.core.release.verify import verify_folder

    uri = mlflow.get_tracking_uri()
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise ReleaseError(f"no MLflow store at {uri.removeprefix('sqlite:///')} yet: {RETRAIN_FIRST}")
    version = _registered(mlflow.MlflowClient(), model_uri)
    with tempfile.TemporaryDirectory(prefix="dprelease-serve-") as tmp:
        where = Path(download_artifacts(artifact_uri=f"models:/{version.name}/{version.version}", dst_path=tmp))
        conf = yaml.safe_load((where / "MLmodel").read_text(encoding="utf-8"))
        listed = conf.get("flavors", {}).get("python_function", {}).get("artifacts", {})
        artifacts = {k: str(where / v["path"]) for k, v in listed.items() if isinstance(v, dict) and "path" in v}
        if ARTIFACT not in artifacts:
            raise ReleaseError(f"{model_uri} (version {version.version}): not a dprelease model (no release artifact)")
        key, check, shipped = release_key(artifacts)
        shown = f"{model_uri} (version {version.version})"
        if not check:
            return f"{shown}: serving WITHOUT a signature check ({NO_CHECK_ENV} is set)"
        try:
            info = verify_folder(artifacts[ARTIFACT], key)
        except SignatureError as err:
            raise ModelSignatureError(f"{shown}: {err}" + (f" ({SHIPPED})" if shipped else "")) from None
        except ReleaseError as err:
            raise ReleaseError(f"{shown}: {err}") from None
    how = "with the key logged with the model (integrity, not authenticity)" if shipped else f"with {key} ({KEY_ENV})"
    return (
        f"{shown}: release signed by {info['signer']} (key {info['key_id'][:16]}), checked {how}; "
        "starting the scoring server"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m dprelease.pipeline.service.pyfunc_model MODEL_URI``: :func:`serve_check`, one line, exit 0 or 2."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dprelease.pipeline.service.pyfunc_model models:/NAME@ALIAS", file=sys.stderr)
        return 2
    try:
        print(serve_check(args[0]))
    except OneLineError as err:
        print(f"dprelease: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    sys.exit(main())
