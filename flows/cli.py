"""Command-line plumbing shared by the flows: common options, params with ``--set`` overrides, the
cheap checks that run before Prefect starts, and one-line errors (exit code 2).

Nothing heavy is imported before the arguments are parsed: a flow module's Prefect flow is built on first use
(:func:`prefect_flow`), so ``python -m flows.NAME --help`` never imports Prefect, torch or a mechanism."""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
from pathlib import Path
from typing import Callable

import yaml

from dprelease.core import offline
from dprelease.core.config import Params, load_params, params_file
from dprelease.core.errors import ConfigError, OneLineError, os_error_line
from dprelease.core.io import LEFTOVER_SUFFIXES, clean_leftovers
from dprelease.core.locks import root_lock
from dprelease.core.release.path import check_release_path
from dprelease.pipeline import stage_store


def parser(doc: str | None) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--params",
        default=params_file(),
        help="the params file, relative to --root (default: $DPRELEASE_PARAMS or params.yaml)",
    )
    ap.add_argument("--root", default=".", help="the project folder the run reads and writes (default: .)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a param, e.g. --set ppm.c=0.8 (repeatable)",
    )
    ap.add_argument("--no-track", action="store_true", help="do not log the run to MLflow")
    return ap


def prefect_flow(namespace: dict, attr: str, fn: Callable, **options):
    """``fn`` as the Prefect flow (``@flow(**options)``) named ``attr`` in the flow module whose globals are
    ``namespace``: built on first use and kept there. A flow module's ``__getattr__`` and ``main`` call this, so
    importing the module (and its ``--help``) never imports Prefect; ``monkeypatch.setattr(module, attr, ...)``
    replaces the flow as it did when it was built at import."""
    if attr not in namespace:
        from prefect import flow

        import tasks.stages  # noqa: F401  (its import guards Prefect's temporary server and makes its home private)

        namespace[attr] = flow(**options)(fn)
    return namespace[attr]


def parse_overrides(items: list[str]) -> dict:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        overrides[key] = yaml.safe_load(value)
    return overrides


EXIT_ERROR = 2  # bad input, bad params, a busy root: one line on stderr, nothing released
EXIT_UNTRACKED = 3  # the release (or report) is written and fine; only the MLflow logging failed
# a failed stage's ERROR lines and tracebacks (the task's and the flow's): kept in Prefect's store (each logger's own
# API handler), not printed: the run prints the failure as one line
QUIET_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)  # unwind: locks, MLflow runs and Prefect's server are closed on the way out


class _BelowError(logging.Handler):
    """The terminal's share of a flow's or task's log: warnings, never the ERROR records of a failure (sys.stderr
    as it is at each record)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("%(asctime)s | %(levelname)-7s | %(name)s - %(message)s", "%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.ERROR:
            sys.stderr.write(self.format(record) + "\n")


def failures_off_terminal() -> Callable[[], None]:
    """Stop the failure records of :data:`QUIET_LOGGERS` reaching the terminal (the root's console handler) while
    they still reach Prefect's store: the loggers stop propagating (a setting Prefect's own re-configuration when its
    server starts leaves alone, unlike a level) and get a handler of their own for what is below ERROR. Returns the
    undo."""
    saved = []
    for name in QUIET_LOGGERS:
        logger, handler = logging.getLogger(name), _BelowError()
        saved.append((logger, logger.propagate, handler))
        logger.propagate = False
        logger.addHandler(handler)

    def undo() -> None:
        for logger, propagate, handler in saved:
            logger.removeHandler(handler)
            logger.propagate = propagate

    return undo


def run(
    args: argparse.Namespace, check: Callable[[Params], None], go: Callable[[Params], dict]
) -> tuple[int, Params | None, dict | None]:
    """Load and validate params, run ``check`` (cheap, before Prefect starts), then ``go`` while holding
    the project root (one run per root). Returns (exit code, params, result); errors print one line and
    give :data:`EXIT_ERROR`."""
    offline.quiet()
    previous = signal.signal(signal.SIGTERM, _terminate)
    loud = lambda: None  # noqa: E731
    try:
        params = load_params(Path(args.root) / args.params, parse_overrides(args.set))
        if not (Path(args.root) / params.data.path).is_file():
            raise ConfigError(f"data.path: file not found: {params.data.path}")
        check_data(params, args.root)
        check_release_path(params, args.root)
        check(params)
        import prefect  # noqa: F401  (Prefect configures logging when first imported: quiet its loggers after that)

        loud = failures_off_terminal()
        with root_lock(args.root):
            from tasks.server_guard import start_early

            starting = start_early()  # Prefect's server starts while the leftovers are cleaned and the flow is built
            _clean(params, Path(args.root))
            if starting is not None:
                starting.join()
            return 0, params, go(params)
    except (OneLineError, ValueError) as err:
        print(f"dprelease: error: {one_line(err)}", file=sys.stderr)
        return EXIT_ERROR, None, None
    except OSError as err:
        print(f"dprelease: error: {os_error_line(err)}", file=sys.stderr)
        return EXIT_ERROR, None, None
    finally:
        loud()
        signal.signal(signal.SIGTERM, previous)


def check_data(params: Params, root: str | Path) -> None:
    """The data file as every flow's first stage reads it, before Prefect starts: its encoding, the text, label and
    date columns, no empty narrative or label, at least two classes (each a one-line DataError naming the file)."""
    from dprelease.core.data import records

    d = params.data
    records.read_records(
        Path(root) / d.path, d.text_column, d.label_column, d.encoding, date_column=params.proxy.date_column
    )


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _clean(params: Params, root: Path) -> None:
    """Leftovers of interrupted runs on this root (safe: we hold the root) and stale half-written store
    entries (shared between roots, so only old ones)."""
    for folder in (params.artifacts, "metrics", "plots", "reports", "runs"):
        clean_leftovers(root / folder)
    release = root / params.release
    for p in release.parent.glob(f".{release.name}*"):
        if p.name.endswith(LEFTOVER_SUFFIXES):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    from tasks.stages import store_dir  # Prefect's home: imported once the arguments are parsed

    stage_store.clean_partial(store_dir())


def tracked(out: dict, log: Callable[[], str]) -> None:
    """Log to MLflow; a failure is recorded (one line) instead of failing a run whose outputs are fine."""
    try:
        out["mlflow_run_id"] = log()
    except Exception as err:  # noqa: BLE001 - any tracking failure leaves the release valid
        out["mlflow_error"] = f"{type(err).__name__}: {one_line(err)}"[:160]


def tracking_status(result: dict, what: str = "release") -> int:
    """One line and :data:`EXIT_UNTRACKED` if MLflow logging failed, else 0."""
    if result.get("mlflow_error"):
        print(
            f"dprelease: warning: the {what} is written and valid, but MLflow logging failed "
            f"({result['mlflow_error']}); log it later with `dprelease track`",
            file=sys.stderr,
        )
        return EXIT_UNTRACKED
    return 0


def print_report(report: Path, result: dict, seconds: float, children: str) -> None:
    """Print a flow's Markdown report, where it is, and the MLflow parent run."""
    print(report.read_text(encoding="utf-8"))
    print(f"\nreport: {report}  ({seconds:.1f} s)")
    if result.get("mlflow_run_id"):
        print(f"MLflow parent run {result['mlflow_run_id']} (one child run per {children}; `make ui`)")


def record_time(timings: dict, params: Params, name: str, seconds: float, *, stage=None) -> float:
    """Keep a stage's duration in ``timings`` unless the stage is declared untimed (its duration grows with
    a data-dependent search no guarantee covers: private selection's tries, re-weighting's refits). Returns
    the seconds that may be reported (0 for an untimed stage), so flow totals leave them out too. ``stage``:
    its declaration, when the plan has it (else looked up)."""
    from dprelease.pipeline import registry

    if not (stage if stage is not None else registry.get(params, name)).timed:
        return 0.0
    timings[name] = round(seconds, 2)
    return seconds
