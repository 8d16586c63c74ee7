"""`make serve-model`: the registry's model over HTTP, MLflow's scoring server behind a front that bounds each
request's work (batch and body size, one-line errors).

See docs/mlflow.md, "Notes from the code", `pipeline/service/model_server.py`."""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import re
import sys
from pathlib import Path

from dprelease.core.errors import OneLineError

MAX_BATCH = 1000  # narratives per request (a 2-core CPU codes them in about 10 s, well inside MLflow's 60 s timeout)
MAX_BYTES = 16 * 1024 * 1024  # request body
CHUNK = 256  # rows scored at a time within a request: between pieces, a client that went away stops the work
BATCH_ENV = "DPRELEASE_SERVE_MAX_BATCH"


class Refused(OneLineError):
    """A request not scored: too many narratives or bytes (413)."""

    def __init__(self, message: str, *, status: int = 413, code: str = "REQUEST_LIMIT_EXCEEDED"):
        super().__init__(message)
        self.status, self.code = status, code


def _rows(doc: dict) -> int:
    """The rows of an MLflow JSON request (its frames, records, instances or inputs)."""
    for key in ("dataframe_split", "dataframe_records", "instances", "inputs"):
        if key not in doc:
            continue
        value = doc[key]
        if key == "dataframe_split" and isinstance(value, dict):
            value = value.get("data", [])
        if isinstance(value, dict):  # columns -> lists
            return max((len(v) for v in value.values() if isinstance(v, list)), default=1)
        return len(value) if isinstance(value, list) else 1
    return 0


def admit(body: bytes, content_type: str, *, max_batch: int, max_bytes: int = MAX_BYTES) -> bytes:
    """The body to score, a ``{"inputs": [strings]}`` list rewritten as a one-column ``narrative`` frame; or
    :class:`Refused` when it holds more than ``max_batch`` narratives or ``max_bytes`` bytes. A body MLflow cannot
    parse is passed on as it is (MLflow answers it: HTTP 400)."""
    if len(body) > max_bytes:
        raise Refused(
            f"request body of {len(body)} bytes is over the limit of {max_bytes} bytes: send fewer or "
            "shorter narratives per request"
        )
    mime = (content_type or "").split(";")[0].strip().lower()
    n = 0
    if mime == "application/json":
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        if not isinstance(doc, dict):
            return body
        n = _rows(doc)
        inputs = doc.get("inputs")
        if n <= max_batch and isinstance(inputs, list) and all(isinstance(t, str) for t in inputs):
            frame = {"dataframe_split": {"columns": ["narrative"], "data": [[t] for t in inputs]}}
            body = json.dumps(frame | ({"params": doc["params"]} if "params" in doc else {})).encode("utf-8")
    elif mime == "text/csv":
        n = max(sum(1 for _ in csv.reader(io.StringIO(body.decode("utf-8", "replace")))) - 1, 0)
    elif mime == "application/x-parquet":
        try:
            import pyarrow.parquet as pq

            n = pq.ParquetFile(io.BytesIO(body)).metadata.num_rows
        except Exception:  # noqa: BLE001 - not parquet: MLflow answers it
            return body
    if n > max_batch:
        raise Refused(
            f"{n} narratives in one request; at most {max_batch} per request: split the batch into several requests"
        )
    return body


def pieces(body: bytes, content_type: str, *, size: int = CHUNK) -> list[bytes]:
    """A JSON request of rows (``dataframe_split``, ``dataframe_records``, or a list under ``instances`` or
    ``inputs``) as requests of at most ``size`` rows each, in order; any other body as it is (one piece)."""
    if (content_type or "").split(";")[0].strip().lower() != "application/json":
        return [body]
    try:
        doc = json.loads(body)
    except ValueError:
        return [body]
    if not isinstance(doc, dict):
        return [body]
    extra = {"params": doc["params"]} if "params" in doc else {}
    split = doc.get("dataframe_split")
    if isinstance(split, dict) and isinstance(split.get("data"), list):
        rows = split["data"]
        make = lambda part: {"dataframe_split": split | {"data": part}}  # noqa: E731
    else:
        key = next((k for k in ("dataframe_records", "instances", "inputs") if isinstance(doc.get(k), list)), None)
        if key is None:
            return [body]
        rows = doc[key]
        make = lambda part: {key: part}  # noqa: E731
    if len(rows) <= size:
        return [body]
    return [json.dumps(make(rows[i : i + size]) | extra).encode("utf-8") for i in range(0, len(rows), size)]


def _rows_from(message: str, offset: int) -> str:
    """A piece's ``row(s) 1, 2`` (the model's one-line messages) as the request's rows: ``offset`` added."""
    if not offset:
        return message
    return re.sub(
        r"row\(s\) ([\d, ]+)",
        lambda m: "row(s) " + ", ".join(str(int(n) + offset) for n in m.group(1).replace(" ", "").split(",") if n),
        message,
    )


def one_line_message(message: str) -> str:
    """MLflow's prediction error without the request it quotes (``Failed to predict data '…'. Error: WHY``)."""
    head, sep, why = message.rpartition("Error: ")
    text = why if sep and head.lstrip().startswith("Failed to predict data") else message
    return " ".join(text.split())[:500]


async def _watch(request, gone: asyncio.Event) -> None:
    """Set ``gone`` when the client disconnects (the body is read: what ``receive`` gives next is the disconnect)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            gone.set()
            return


def app(model, *, max_batch: int = MAX_BATCH, max_bytes: int = MAX_BYTES):
    """MLflow's scoring app for ``model`` (a loaded pyfunc model) with ``/invocations`` replaced by the bounded one."""
    from fastapi import Request
    from fastapi.responses import Response
    from mlflow.exceptions import MlflowException
    from mlflow.pyfunc import scoring_server

    base = scoring_server.init(model)
    base.router.routes = [r for r in base.router.routes if getattr(r, "path", None) != "/invocations"]
    schema = model.metadata.get_input_schema()

    def error(status: int, code: str, message: str) -> Response:
        return Response(
            content=json.dumps({"error_code": code, "message": message}),
            status_code=status,
            media_type="application/json",
        )

    async def invocations(request):
        size = request.headers.get("content-length", "")
        if size.isdigit() and int(size) > max_bytes:  # refused before the body is read
            return error(
                413,
                "REQUEST_LIMIT_EXCEEDED",
                f"request body of {size} bytes is over the limit of "
                f"{max_bytes} bytes: send fewer or shorter narratives per request",
            )
        content_type, watcher = request.headers.get("content-type") or "", None
        try:
            parts = pieces(
                admit(await request.body(), content_type, max_batch=max_batch, max_bytes=max_bytes), content_type
            )
            predictions, gone = [], asyncio.Event()
            watcher = asyncio.create_task(_watch(request, gone)) if len(parts) > 1 else None
            for i, part in enumerate(parts):
                # a client gone (its timeout) stops the work between pieces; so does MLflow's own timeout, which
                # cancels this coroutine at the await below (the piece under way is the one finished)
                if gone.is_set():
                    print(
                        f"dprelease: model server: request cancelled after {len(predictions)} narratives "
                        f"(piece {i} of {len(parts)}): the client went away",
                        file=sys.stderr,
                        flush=True,
                    )
                    return Response(status_code=499)
                try:
                    result = await asyncio.to_thread(scoring_server.invocations, part, content_type, model, schema)
                except MlflowException as err:  # its rows, counted from the request's first
                    err.message = _rows_from(one_line_message(err.message), i * CHUNK)
                    raise
                if len(parts) == 1 or result.status != 200:
                    return Response(content=result.response, status_code=result.status, media_type=result.mimetype)
                predictions += json.loads(result.response)["predictions"]
        except Refused as err:
            return error(err.status, err.code, str(err))
        except MlflowException as err:
            return error(err.get_http_status_code(), err.error_code, one_line_message(err.message))
        finally:
            if watcher is not None:
                watcher.cancel()
        return Response(
            content=json.dumps({"predictions": predictions}), status_code=200, media_type="application/json"
        )

    invocations.__annotations__["request"] = Request  # the class itself: FastAPI cannot resolve a postponed name here
    base.post("/invocations")(invocations)
    return base


def _record(root: Path, port: int, model_uri: str) -> Path:
    """``.prefect/serve/model.json`` naming this process, or a one-line error when a model server runs already."""
    from dprelease.pipeline.service import supervisor as sv

    path = root / sv.STATE / sv.MODEL  # {"pid", "port", "model"}
    if path.is_file():
        pid = json.loads(path.read_text(encoding="utf-8")).get("pid")
        if pid and sv.alive(pid):
            raise OneLineError(f"already serving the model (pid {pid}, {path}); run `make serve-stop`")
    if sv.port_in_use(port):
        raise OneLineError(f"port {port} on {sv.HOST} is in use: stop what listens there or give another --port")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "port": port, "model": model_uri}) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dprelease.pipeline.service.model_server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("model", help="the model: models:/NAME@ALIAS, models:/NAME/VERSION or a local model folder")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5001)
    ap.add_argument(
        "--max-batch",
        type=int,
        default=int(os.environ.get(BATCH_ENV) or MAX_BATCH),
        help=f"narratives per request; above: HTTP 413 (default ${BATCH_ENV} or {MAX_BATCH})",
    )
    ap.add_argument("--max-bytes", type=int, default=MAX_BYTES, help=f"request body bytes (default {MAX_BYTES})")
    ap.add_argument("--root", default=".", help="the project root (its .prefect/serve/ records the server's pid)")
    args = ap.parse_args(argv)
    if args.max_batch < 1 or args.max_bytes < 1:
        print("dprelease: error: --max-batch and --max-bytes must be at least 1", file=sys.stderr)
        return 2
    try:
        state = _record(Path(args.root), args.port, args.model)
    except OneLineError as err:
        print(f"dprelease: error: {err}", file=sys.stderr)
        return 2
    try:
        import mlflow.pyfunc
        import uvicorn

        try:
            model = mlflow.pyfunc.load_model(args.model)
        except OneLineError as err:  # the release's signature or files (pyfunc_model.load_release)
            print(f"dprelease: error: {err}", file=sys.stderr)
            return 2
        print(
            f"serving {args.model} on http://{args.host}:{args.port}/invocations (at most {args.max_batch} "
            f"narratives per request; pid {os.getpid()}, stopped by `make serve-stop`)",
            flush=True,
        )
        uvicorn.run(
            app(model, max_batch=args.max_batch, max_bytes=args.max_bytes),
            host=args.host,
            port=args.port,
            log_level="warning",
        )
    except KeyboardInterrupt:
        pass
    finally:
        if state.is_file() and json.loads(state.read_text(encoding="utf-8")).get("pid") == os.getpid():
            state.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    sys.exit(main())
