"""`make serve-model`'s server (dprelease.pipeline.service.model_server): at most N narratives per request (HTTP 413
in one line above), ``{"inputs": [strings]}`` accepted, a request scored in pieces (stopped between them when its
client goes away), MLflow's error lines without the quoted request, and ``make serve-stop`` (``python -m flows.serve
stop``) stopping it by its pid file. The limits are tested against a running server; every wait is on an event (the server answering /ping, the process gone), never a fixed sleep."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT
from release_helpers import CODES

from dprelease.pipeline.service.model_server import Refused, admit, one_line_message, pieces

WAIT_S = 900  # generous, for a loaded machine; each wait returns as soon as its event happens


# the front's rules, without a server -------------------------------------------------------------------------------
def _json(doc) -> bytes:
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "request_of",
    [
        lambda n: {"dataframe_split": {"columns": ["narrative"], "data": [["a"]] * n}},
        lambda n: {"dataframe_records": [{"narrative": "a"}] * n},
        lambda n: {"instances": ["a"] * n},
        lambda n: {"inputs": ["a"] * n},
        lambda n: {"inputs": {"narrative": ["a"] * n}},
    ],
    ids=["dataframe_split", "dataframe_records", "instances", "inputs", "inputs-columns"],
)
def test_more_than_the_batch_is_refused_in_every_format(request_of):
    assert admit(_json(request_of(4)), "application/json", max_batch=4)  # at the limit: admitted
    with pytest.raises(Refused, match=r"^5 narratives in one request; at most 4 per request") as err:
        admit(_json(request_of(5)), "application/json", max_batch=4)
    assert err.value.status == 413 and "\n" not in str(err.value)


def test_csv_rows_count_and_bytes_are_bounded():
    text = "narrative\n" + "".join(f'"line one\nline two {i}"\n' for i in range(3))  # embedded newlines: 3 rows
    assert admit(text.encode(), "text/csv", max_batch=3)
    with pytest.raises(Refused, match="4 narratives"):
        admit((text + "another\n").encode(), "text/csv; charset=utf-8", max_batch=3)
    with pytest.raises(Refused, match="over the limit of 10 bytes"):
        admit(b"x" * 11, "application/json", max_batch=3, max_bytes=10)


def test_a_list_of_strings_becomes_a_narrative_frame():
    body = admit(_json({"inputs": ["fell", "cut"], "params": {}}), "application/json", max_batch=10)
    assert json.loads(body) == {
        "dataframe_split": {"columns": ["narrative"], "data": [["fell"], ["cut"]]},
        "params": {},
    }
    frame = _json({"dataframe_split": {"columns": ["narrative"], "data": [["x"]]}})
    assert admit(frame, "application/json", max_batch=10) == frame  # MLflow's own formats pass as they are
    assert admit(b"not json", "application/json", max_batch=10) == b"not json"  # MLflow answers it


def test_a_request_is_scored_in_pieces_of_rows():
    doc = {"dataframe_split": {"columns": ["narrative"], "data": [["a"]] * 600}, "params": {}}
    parts = [json.loads(p) for p in pieces(_json(doc), "application/json", size=256)]
    assert [len(p["dataframe_split"]["data"]) for p in parts] == [256, 256, 88]
    assert all(p["dataframe_split"]["columns"] == ["narrative"] and p["params"] == {} for p in parts)
    assert [
        len(json.loads(p)["dataframe_records"])
        for p in pieces(_json({"dataframe_records": [{"narrative": "a"}] * 300}), "application/json", size=256)
    ] == [256, 44]
    small = _json({"inputs": ["a"] * 3})
    assert pieces(small, "application/json", size=256) == [small] and pieces(b"x,y", "text/csv") == [b"x,y"]


def test_mlflow_error_lines_lose_the_quoted_request():
    msg = "Failed to predict data '   narrative\n0  x\n1   '. \nError: empty narrative in row(s) 2"
    assert one_line_message(msg) == "empty narrative in row(s) 2"
    assert one_line_message("Invalid input.\n  Expected a string") == "Invalid input. Expected a string"


# against a running server --------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port: int, payload, content_type: str = "application/json") -> tuple[int, dict]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/invocations", data=data, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(req, timeout=WAIT_S) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _up(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        assert proc.poll() is None, proc.communicate()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"the model server did not answer /ping in {WAIT_S} s"
        time.sleep(0.2)


@pytest.fixture
def model_dir(tmp_path):
    """A tiny signed release saved as the pyfunc model (as a retrain logs it: the model from code, the release
    and the agency's public key as artifacts), in a local folder."""
    import mlflow.pyfunc
    from release_helpers import tiny_release

    from dprelease.core.release.signing import PUBLIC, ensure_key
    from dprelease.pipeline.service import model_registry
    from dprelease.pipeline.service.pyfunc_model import ARTIFACT, KEY_ARTIFACT, SIGNATURE

    signer, _ = ensure_key(tmp_path / "agency")
    release = tiny_release(tmp_path / "release", signer=signer)
    where = tmp_path / "model"
    code = Path(model_registry.__file__).with_name("model_code.py")
    mlflow.pyfunc.save_model(
        str(where),
        python_model=str(code),
        signature=SIGNATURE,
        artifacts={ARTIFACT: str(release), KEY_ARTIFACT: str(tmp_path / "agency" / PUBLIC)},
    )
    return where


@pytest.mark.slow
def test_a_running_server_bounds_batches_takes_lists_cancels_and_serve_stop_stops_it(model_dir, tmp_path):
    root, port = tmp_path / "project", _free_port()
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPRELEASE_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dprelease.pipeline.service.model_server",
            str(model_dir),
            "--port",
            str(port),
            "--max-batch",
            "2000",
            "--root",
            str(root),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    try:
        _up(port, proc)
        state = json.loads((root / ".prefect/serve/model.json").read_text(encoding="utf-8"))
        assert state["pid"] == proc.pid and state["port"] == port

        status, body = _post(port, {"inputs": ["An employee fell from a ladder.", "A finger was cut."]})
        assert status == 200 and [p["code"] for p in body["predictions"]] == [CODES[0]] * 2, body
        frame = pd.DataFrame({"Final Narrative": ["fell", "cut", "burned"] * 100})  # 300: two pieces, one answer
        status, body = _post(port, {"dataframe_split": frame.to_dict(orient="split", index=False)})
        assert status == 200 and len(body["predictions"]) == 300, body

        status, body = _post(port, {"inputs": ["fell"] * 2001})  # one over the batch
        assert status == 413 and body["error_code"] == "REQUEST_LIMIT_EXCEEDED", body
        assert body["message"] == (
            "2001 narratives in one request; at most 2000 per request: split the batch into several requests"
        ), body
        status, body = _post(port, {"inputs": ["fell"] * 289 + ["  "] + ["cut"] * 10})  # in the second piece
        assert status == 400 and body["message"] == "empty narrative in row(s) 290", body  # one line, no request

        # a client that gives up: the server stops between pieces and says so in one line
        text = "An employee fell from a ladder while carrying roofing material and fractured a wrist."
        with pytest.raises(OSError):  # the client's own timeout (urllib: a socket timeout)
            urllib.request.urlopen(
                urllib.request.Request(
                    f"http://127.0.0.1:{port}/invocations",
                    data=json.dumps({"inputs": [text] * 2000}).encode(),
                    headers={"Content-Type": "application/json"},
                ),
                timeout=0.5,
            )
        line = lines.get(timeout=WAIT_S)
        while "request cancelled" not in line:
            line = lines.get(timeout=WAIT_S)
        assert line.startswith("dprelease: model server: request cancelled after ") and "of 8" in line, line
        assert "the client went away" in line, line

        stop = subprocess.run(
            [sys.executable, "-m", "flows.serve", "stop", "--root", str(root)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )
        assert stop.returncode == 0 and f"{proc.pid}" in stop.stdout, stop.stdout + stop.stderr
        proc.wait(timeout=WAIT_S)
        assert not (root / ".prefect/serve/model.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=WAIT_S)
