"""privacy/stages: the ``secret`` stage — created once, never shared between roots (``shared=False``), its
declared output the key's public id; running it again keeps the key."""

from __future__ import annotations

import json

from dprelease.core.config import parse_params
from dprelease.core.privacy import secret
from dprelease.core.privacy.stages import declare, ensure, key_id_file


def test_the_secret_stage_is_declared_unshared_with_the_key_id_as_output():
    params = parse_params({})
    (stage,) = declare(params)
    assert stage.name == "secret" and not stage.shared and stage.outs == [key_id_file(params)]
    assert key_id_file(params) == f"{params.artifacts}/secret/{secret.KEY_ID}"


def test_ensure_creates_the_key_once_and_keeps_it(tmp_path):
    params = parse_params({})
    assert ensure(params, tmp_path) == {"key": "ready"}  # the summary carries no id
    first = json.loads((tmp_path / key_id_file(params)).read_text())
    ensure(params, tmp_path)
    assert json.loads((tmp_path / key_id_file(params)).read_text()) == first
    assert secret.key_id(tmp_path / params.artifacts) == first["key_id"]
