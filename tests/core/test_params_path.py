"""dprelease.core.params_path: the default params file, ``$DPRELEASE_PARAMS`` else ``params.yaml``, without pydantic
(the command line's defaults); the typed config re-exports the same function."""

from __future__ import annotations

import subprocess
import sys

from dprelease.core import config
from dprelease.core.params_path import ENV, params_file


def test_the_environment_names_the_file_else_params_yaml(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert params_file() == "params.yaml"
    monkeypatch.setenv(ENV, "tiny.yaml")
    assert params_file() == "tiny.yaml"
    monkeypatch.setenv(ENV, "")
    assert params_file() == "params.yaml"


def test_one_definition_and_no_pydantic():
    assert config.params_file is params_file
    code = "import sys, dprelease.core.params_path; print('pydantic' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )
