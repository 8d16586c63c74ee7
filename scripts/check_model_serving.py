"""A partner's view of a registered model: a plain virtualenv with the model's own requirements serves it.

    python scripts/check_model_serving.py [--model-uri models:/oiics-autocoder@production]
                                          [--tracking-uri sqlite:///mlflow.db] [--venv DIR]

Downloads the model, makes a fresh virtualenv (``python -m venv``, nothing of this project in it),
``pip install -r`` the model's ``requirements.txt``, starts ``mlflow models serve --env-manager local``
from that virtualenv without activating it (its ``bin/`` first on PATH, as the README documents), and
checks the scoring server: a frame with the extract's own ``Final Narrative`` column and one with
``narrative`` are coded (HTTP 200), an empty narrative is an HTTP 400 with a one-line message and no stack
trace. Prints each step's seconds; exits 1 on the first failed check. The virtualenv is removed unless
``--venv`` names where to keep it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NARRATIVE = "Employee fell from a ladder and fractured his left wrist."  # made up


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Serve a registered model from a plain virtualenv and check it.")
    p.add_argument("--model-uri", default="models:/oiics-autocoder@production", help="the model to serve")
    p.add_argument("--tracking-uri", default=f"sqlite:///{ROOT / 'mlflow.db'}", help="the MLflow store holding it")
    p.add_argument("--venv", type=Path, help="make (and keep) the virtualenv here (default: a temporary folder)")
    p.add_argument("--timeout", type=float, default=600, help="seconds for the install and for the server start")
    return p.parse_args(argv)


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode() or "{}")


def check(ok: bool, what: str) -> None:
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import mlflow

    mlflow.set_tracking_uri(args.tracking_uri)
    with tempfile.TemporaryDirectory(prefix="model-serving-") as tmp:
        t = time.perf_counter()
        model = Path(mlflow.artifacts.download_artifacts(args.model_uri, dst_path=str(Path(tmp) / "model")))
        reqs = (model / "requirements.txt").read_text().split()
        check(not any("+" in r for r in reqs), f"requirements carry no local version label: {' '.join(reqs)}")
        venv = args.venv or Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True, timeout=args.timeout)
        subprocess.run([*pip, "-r", str(model / "requirements.txt")], check=True, timeout=args.timeout)
        print(f"plain virtualenv with the model's requirements: {time.perf_counter() - t:.0f} s", flush=True)

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "MLFLOW_TRACKING_URI")}
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"  # the documented form: no activation
        log = open(Path(tmp) / "serve.log", "w+")  # noqa: SIM115 - read back on failure
        t = time.perf_counter()
        proc = subprocess.Popen(
            [
                str(venv / "bin" / "mlflow"),
                "models",
                "serve",
                "-m",
                str(model),
                "--env-manager",
                "local",
                "--host",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            cwd=tmp,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            while time.perf_counter() - t < args.timeout and proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"{base}/ping", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    time.sleep(1)
            if proc.poll() is not None or time.perf_counter() - t >= args.timeout:
                log.seek(0)
                sys.stderr.write(log.read()[-3000:])
                check(False, "the scoring server started")
            print(f"scoring server up: {time.perf_counter() - t:.0f} s", flush=True)
            for column in ("Final Narrative", "narrative"):
                t = time.perf_counter()
                code, body = post(
                    f"{base}/invocations", {"dataframe_split": {"columns": ["ID", column], "data": [["1", NARRATIVE]]}}
                )
                row = (body.get("predictions") or [{}])[0]
                check(
                    code == 200 and {"code", "title", "probability"} <= set(row),
                    f"column {column!r}: HTTP {code}, {row} ({time.perf_counter() - t:.1f} s)",
                )
            code, body = post(f"{base}/invocations", {"dataframe_split": {"columns": ["narrative"], "data": [[" "]]}})
            check(
                code == 400 and "stack_trace" not in body and "empty narrative" in body.get("message", ""),
                f"empty narrative: HTTP {code}, {body}",
            )
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
