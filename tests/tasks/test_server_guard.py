"""tasks.server_guard: Prefect's temporary server is launched through the guard; a run against a server
(``PREFECT_API_URL`` set, as in a worker's flow run) starts no temporary server, so nothing is patched and
Prefect's server code is not imported. (That a killed run's guarded server dies with it:
tests/flows/test_faults.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT

PROBE = """
import json, sys
from tasks import server_guard
server_guard.install()
loaded = "prefect.server.api.server" in sys.modules
guarded = loaded and sys.modules["prefect.server.api.server"].SubprocessASGIServer._run_uvicorn_command.__name__
print(json.dumps({"loaded": loaded, "launcher": guarded}))
"""


def _probe(api_url: str) -> dict:
    env = os.environ | {"PREFECT_API_URL": api_url, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )  # generous (a loaded machine): it returns when the probe does
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_temporary_server_is_launched_through_the_guard():
    assert _probe("") == {"loaded": True, "launcher": "guarded"}


def test_a_run_against_a_server_patches_and_imports_nothing():
    assert _probe("http://127.0.0.1:9/api") == {"loaded": False, "launcher": False}
