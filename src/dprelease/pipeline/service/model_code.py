"""The autocoder as an MLflow "model from code": MLflow runs this file when the model loads, so no
pickled Python object is stored in the model (the project never unpickles what it did not write)."""

from mlflow.models import set_model

from dprelease.pipeline.service.pyfunc_model import AutocoderModel

set_model(AutocoderModel())
