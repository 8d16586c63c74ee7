"""The SWAG-PPM release flow: the stages of ``dprelease.pipeline`` as cached Prefect tasks, then one
MLflow run. ``python -m flows.release [--params params.yaml] [--set ppm.c=0.8] [--no-track]``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tasks import prefect_env

prefect_env.configure()

from prefect import flow  # noqa: E402

from dprelease import pipeline  # noqa: E402
from dprelease.cli import _quiet  # noqa: E402
from dprelease.config import ConfigError, Params, load_params  # noqa: E402
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


def _parse_overrides(items: list[str]) -> dict:
    import yaml

    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        overrides[key] = yaml.safe_load(value)
    return overrides


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--root", default=".")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--no-track", action="store_true")
    args = ap.parse_args(argv)
    _quiet()
    from dprelease.data import DataError
    from dprelease.release import ReleaseError

    try:  # validate everything cheap before any Prefect start-up or training
        params = load_params(Path(args.root) / args.params, _parse_overrides(args.set))
        if not (Path(args.root) / params.data.path).is_file():
            raise ConfigError(f"data.path: file not found: {params.data.path}")
        start = time.perf_counter()
        result = release_flow(params.model_dump(mode="json"), args.root, not args.no_track)
    except (ConfigError, DataError, ReleaseError) as err:
        print(f"dprelease: error: {err}", file=sys.stderr)
        return 2
    from dprelease.io import write_json
    from flows.summary import print_summary

    seconds = time.perf_counter() - start
    write_json(Path(args.root) / "metrics" / "timings.json",
               {"flow_seconds": round(seconds, 2), "stages": list(result["timings"].items())})
    print_summary(params, args.root, result, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
