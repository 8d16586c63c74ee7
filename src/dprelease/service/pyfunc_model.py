"""The release as an MLflow model: a pyfunc wrapper over :class:`dprelease.release.Coder` (the same code
as ``dprelease predict``), so ``mlflow.pyfunc.load_model(uri).predict(frame)`` codes narratives.

Input: a DataFrame with a narrative column (``narrative``, ``Final Narrative`` or ``text``; a frame with a
single column is taken as it is), a Series or a list of strings. Output: a DataFrame with ``code``,
``title`` and ``probability`` per narrative. The release folder is the model's only artifact (its
``release.sig`` included) and is verified (manifest hashes, shapes) when the model loads; with
``DPRELEASE_AGENCY_KEY`` naming the agency's public key (``agency.pub``) in the loading environment, its
signature too: a model whose release the agency did not sign does not load.
"""

from __future__ import annotations

import os

import pandas as pd
import mlflow.pyfunc
from mlflow.models import ModelSignature
from mlflow.types import ColSpec, Schema

from ..errors import ReleaseError
from ..release import NARRATIVE_COLUMNS, Coder

ARTIFACT = "release"
KEY_ENV = "DPRELEASE_AGENCY_KEY"  # the agency's public key file: when set, loading checks the signature
SIGNATURE = ModelSignature(inputs=Schema([ColSpec("string", "narrative")]),
                           outputs=Schema([ColSpec("string", "code"), ColSpec("string", "title"),
                                           ColSpec("double", "probability")]))


def narratives(model_input) -> list[str]:
    """The narratives of a pyfunc input, or a one-line :class:`ReleaseError`."""
    if isinstance(model_input, pd.DataFrame):
        columns = [c for c in ("narrative", *NARRATIVE_COLUMNS) if c in model_input.columns]
        if not columns and len(model_input.columns) != 1:
            raise ReleaseError(f"no narrative column (looked for narrative, {', '.join(NARRATIVE_COLUMNS)}; found "
                               f"{', '.join(map(str, model_input.columns))})")
        model_input = model_input[columns[0] if columns else model_input.columns[0]]
    texts = [str(t).strip() if t is not None else "" for t in list(model_input)]
    empty = [i + 1 for i, t in enumerate(texts) if not t]
    if empty:
        raise ReleaseError(f"empty narrative in row(s) {', '.join(map(str, empty[:5]))}")
    return texts


class AutocoderModel(mlflow.pyfunc.PythonModel):
    """Loads the release folder once; ``predict`` codes narratives on the CPU."""

    def load_context(self, context) -> None:
        self._coder = Coder(context.artifacts[ARTIFACT], device="cpu", key=os.environ.get(KEY_ENV) or None)

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        return self._coder(narratives(model_input))
