"""Command-line plumbing shared by the flows: common options, params with ``--set`` overrides, the
cheap checks that run before Prefect starts, and one-line errors (exit code 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

import yaml

from dprelease import offline
from dprelease.config import Params, load_params
from dprelease.errors import ConfigError, OneLineError


def parser(doc: str | None) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--root", default=".")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a param")
    ap.add_argument("--no-track", action="store_true", help="skip MLflow")
    return ap


def parse_overrides(items: list[str]) -> dict:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        overrides[key] = yaml.safe_load(value)
    return overrides


def run(args: argparse.Namespace, check: Callable[[Params], None], go: Callable[[Params], dict]) -> tuple[int, Params | None, dict | None]:
    """Load and validate params, run ``check`` (cheap, before Prefect starts), then ``go``.
    Returns (exit code, params, result); errors print one line and give exit code 2."""
    offline.quiet()
    try:
        params = load_params(Path(args.root) / args.params, parse_overrides(args.set))
        if not (Path(args.root) / params.data.path).is_file():
            raise ConfigError(f"data.path: file not found: {params.data.path}")
        check(params)
        return 0, params, go(params)
    except (OneLineError, ValueError, FileNotFoundError) as err:
        print(f"dprelease: error: {err}", file=sys.stderr)
        return 2, None, None


def print_report(report: Path, result: dict, seconds: float, children: str) -> None:
    """Print a flow's Markdown report, where it is, and the MLflow parent run."""
    print(report.read_text(encoding="utf-8"))
    print(f"\nreport: {report}  ({seconds:.1f} s)")
    if result.get("mlflow_run_id"):
        print(f"MLflow parent run {result['mlflow_run_id']} (one child run per {children}; `make ui`)")
