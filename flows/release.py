"""The SWAG-PPM release flow: the stages of ``dprelease.pipeline`` as cached Prefect tasks, then one
MLflow run. ``python -m flows.release [--params params.yaml] [--set ppm.c=0.8] [--no-track]``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tasks import prefect_env

prefect_env.configure()

from prefect import flow  # noqa: E402

from dprelease import pipeline  # noqa: E402
from dprelease.config import Params  # noqa: E402
from dprelease.io import write_json  # noqa: E402
from flows import cli  # noqa: E402
from flows.summary import print_summary  # noqa: E402
from tasks.stages import run as run_stage_task  # noqa: E402
from tasks.stages import track_task  # noqa: E402


@flow(name="swag-ppm-release", log_prints=False)
def release_flow(params: dict, root: str = ".", track: bool = True) -> dict:
    p = Params.model_validate(params)
    out: dict = {"timings": {}}
    for spec in pipeline.active(p):
        start = time.perf_counter()
        out[spec.name] = run_stage_task(spec.name, p, root)
        out["timings"][spec.name] = round(time.perf_counter() - start, 2)
    if track:
        out["mlflow_run_id"] = track_task(params, root)
    return out


def main(argv: list[str] | None = None) -> int:
    args = cli.parser(__doc__).parse_args(argv)
    start = time.perf_counter()
    code, params, result = cli.run(args, lambda p: None,
                                   lambda p: release_flow(p.model_dump(mode="json"), args.root, not args.no_track))
    if code:
        return code
    seconds = time.perf_counter() - start
    write_json(Path(args.root) / "metrics" / "timings.json",
               {"flow_seconds": round(seconds, 2), "stages": list(result["timings"].items())})
    print_summary(params, args.root, result, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
