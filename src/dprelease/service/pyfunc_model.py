"""The release as an MLflow model: a pyfunc wrapper over :class:`dprelease.release.Coder` (the same code
as ``dprelease predict``), so ``mlflow.pyfunc.load_model(uri).predict(frame)`` codes narratives.

Input: a DataFrame with a narrative column (``narrative``, or the extract's own ``Final Narrative``, or
``text``; a frame with a single column is taken as it is), a Series or a list of strings. The signature
lists the three column names as optional, so MLflow's schema check (``mlflow models serve`` included)
accepts a frame with any one of them. Output: a DataFrame with ``code``, ``title`` and ``probability``
per narrative. Bad input (no narrative column, an empty narrative) is an ``MlflowException`` with a
one-line message, which the scoring server answers with HTTP 400 and no stack trace. The release folder
is the model's only artifact (its ``release.sig`` included) and is verified (manifest hashes, shapes)
when the model loads; with ``DPRELEASE_AGENCY_KEY`` naming the agency's public key (``agency.pub``) in the
loading environment, its signature too: a model whose release the agency did not sign does not load.
"""

from __future__ import annotations

import os

import pandas as pd
import mlflow.pyfunc
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.types import ColSpec, Schema

from ..errors import ReleaseError
from ..release import NARRATIVE_COLUMNS, Coder

ARTIFACT = "release"
INPUT_COLUMNS = ("narrative", *(c for c in NARRATIVE_COLUMNS if c != "narrative"))
KEY_ENV = "DPRELEASE_AGENCY_KEY"  # the agency's public key file: when set, loading checks the signature
SIGNATURE = ModelSignature(inputs=Schema([ColSpec("string", c, required=False) for c in INPUT_COLUMNS]),
                           outputs=Schema([ColSpec("string", "code"), ColSpec("string", "title"),
                                           ColSpec("double", "probability")]))


def narratives(model_input) -> list[str]:
    """The narratives of a pyfunc input, or a one-line :class:`ReleaseError`."""
    if isinstance(model_input, pd.DataFrame):
        # a named column with a value first: MLflow may add the optional ones the caller left out, empty
        columns = sorted((c for c in INPUT_COLUMNS if c in model_input.columns),
                         key=lambda c: model_input[c].isna().all())
        if not columns and len(model_input.columns) != 1:
            raise ReleaseError(f"no narrative column (looked for {', '.join(INPUT_COLUMNS)}; found "
                               f"{', '.join(map(str, model_input.columns))})")
        model_input = model_input[columns[0] if columns else model_input.columns[0]]
    texts = [str(t).strip() if t is not None and t == t else "" for t in list(model_input)]
    empty = [i + 1 for i, t in enumerate(texts) if not t]
    if empty:
        raise ReleaseError(f"empty narrative in row(s) {', '.join(map(str, empty[:5]))}")
    return texts


class AutocoderModel(mlflow.pyfunc.PythonModel):
    """Loads the release folder once; ``predict`` codes narratives on the CPU."""

    def load_context(self, context) -> None:
        self._coder = Coder(context.artifacts[ARTIFACT], device="cpu", key=os.environ.get(KEY_ENV) or None)

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        try:
            texts = narratives(model_input)
        except ReleaseError as err:  # the caller's input: a 400 with this line, not a 500 with a trace
            raise MlflowException(str(err), error_code=INVALID_PARAMETER_VALUE) from None
        return self._coder(texts)
