"""service.model_code: the file MLflow runs when the registered model loads sets exactly one model, the
project's autocoder (a model from code, so nothing pickled is ever loaded)."""

from __future__ import annotations

import importlib
import sys

import mlflow.models.model as mlflow_model

from dprelease.pipeline.service.pyfunc_model import AutocoderModel


def test_loading_the_code_file_sets_the_autocoder(monkeypatch):
    monkeypatch.delattr(mlflow_model, "__mlflow_model__", raising=False)
    monkeypatch.delitem(sys.modules, "dprelease.pipeline.service.model_code", raising=False)
    importlib.import_module("dprelease.pipeline.service.model_code")
    assert isinstance(mlflow_model.__mlflow_model__, AutocoderModel)
