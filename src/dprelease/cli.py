"""Command line: ``dprelease stage NAME`` (what dvc.yaml runs), ``dprelease predict``, ``dprelease track``."""

from __future__ import annotations

import argparse
import sys

from .config import ConfigError, load_params


def _quiet() -> None:
    import os
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dprelease", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("stage", help="run one pipeline stage (as dvc.yaml does)")
    st.add_argument("name")
    st.add_argument("--params", default="params.yaml")
    pr = sub.add_parser("predict", help="code narratives with a release folder")
    pr.add_argument("--release", required=True)
    pr.add_argument("--input", required=True)
    pr.add_argument("--output", required=True)
    pr.add_argument("--text-column", default=None)
    pr.add_argument("--device", default="cpu")
    tr = sub.add_parser("track", help="log the finished pipeline run to MLflow")
    tr.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    _quiet()

    from .data import DataError
    from .release import ReleaseError

    try:
        if args.command == "stage":
            from .stages import run_stage

            summary = run_stage(args.name, load_params(args.params))
            print(f"{args.name}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in summary.items()))
        elif args.command == "predict":
            from .release import predict

            n = predict(args.release, args.input, args.output, args.text_column, args.device)
            print(f"coded {n} narratives -> {args.output}")
        elif args.command == "track":
            from .tracking import log_pipeline_run

            run_id = log_pipeline_run(load_params(args.params))
            print(f"MLflow run {run_id}")
    except (ConfigError, DataError, ReleaseError, KeyError, FileNotFoundError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"dprelease: error: {msg}", file=sys.stderr)
        return 2
    return 0


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    sys.exit(main())
