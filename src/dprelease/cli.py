"""Command line: ``dprelease stage NAME`` (what dvc.yaml runs), ``dprelease predict``, ``dprelease sanitize``,
``dprelease verify`` (a release's signature), ``dprelease key`` (the agency signing key), ``dprelease track``,
``dprelease dvc-yaml``, ``dprelease plugin-index`` and ``dprelease secret init|rotate|show`` (the randomness key).

Arguments are parsed before anything heavy is imported: each command imports what it runs, and ``stage NAME``
only that stage's package (:func:`dprelease.pipeline.registry.get`)."""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from functools import partial

from dprelease.core import offline
from dprelease.core.errors import OneLineError, os_error_line
from dprelease.core.params_path import params_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dprelease", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("stage", help="run one pipeline stage (as dvc.yaml does)")
    st.add_argument("name", help="the stage to run (its name in dvc.yaml)")
    st.add_argument(
        "--params", default=params_file(), help="the params file (default: $DPRELEASE_PARAMS or params.yaml)"
    )
    pr = sub.add_parser("predict", help="code narratives with a release folder")
    pr.add_argument("--release", required=True, help="the release folder (holds release.json)")
    pr.add_argument("--input", required=True, help="a CSV of narratives (bundled or OSHA format)")
    pr.add_argument("--output", required=True, help="the CSV to write: the input plus code, title, probability")
    pr.add_argument(
        "--text-column",
        default=None,
        help="the narrative column (default: Final Narrative, narrative or text, the first present)",
    )
    pr.add_argument("--device", default="cpu", help="torch device for scoring: cpu (default), cuda or mps")
    pr.add_argument(
        "--encoding",
        choices=("auto", "utf-8", "cp1252"),
        default="auto",
        help="input CSV encoding; auto: UTF-8, or cp1252 for a file with no UTF-8 multi-byte text",
    )
    pr.add_argument("--key", default=None, help=KEY_HELP)
    pr.add_argument("--no-signature-check", action="store_true", help=NO_CHECK_HELP)
    pr.add_argument(
        "--force",
        action="store_true",
        help="replace the output file if it exists (without it, an existing output is refused)",
    )
    pr.add_argument(
        "--column-prefix",
        default="",
        help="put this before the new columns' names (code, title, probability): for an input that "
        "already has columns of those names, which predict never overwrites",
    )
    sa = sub.add_parser("sanitize", help="privatize narratives with a sanitizer release (one draw each, parquet)")
    sa.add_argument("--release", required=True, help="the sanitizer release folder")
    sa.add_argument("--input", required=True, help="a CSV of narratives to privatize")
    sa.add_argument("--output", required=True, help="a .parquet file: input row number + the privatized draws")
    sa.add_argument(
        "--text-column",
        default=None,
        help="the narrative column (default: Final Narrative, narrative or text, the first present)",
    )
    sa.add_argument(
        "--encoding",
        choices=("auto", "utf-8", "cp1252"),
        default="auto",
        help="input CSV encoding; auto: UTF-8, or cp1252 for a file with no UTF-8 multi-byte text",
    )
    sa.add_argument(
        "--seed",
        type=int,
        default=None,
        help="for tests only: a known seed lets anyone who knows it undo the noise (default: OS entropy)",
    )
    sa.add_argument("--key", default=None, help=KEY_HELP)
    sa.add_argument("--no-signature-check", action="store_true", help=NO_CHECK_HELP)
    ve = sub.add_parser("verify", help="check a release folder's signature and files against the agency's public key")
    ve.add_argument("--release", required=True, help="the release folder to check (classifier or sanitizer)")
    ve.add_argument(
        "--key", default=None, help="the agency's public key (agency.pub; default: the file DPRELEASE_AGENCY_KEY names)"
    )
    ke = sub.add_parser(
        "key",
        help="the agency signing key: init (once), show, export (the public key), rotate; "
        "export-private / import-private (both private keys, for a second operator)",
    )
    ke.add_argument(
        "action",
        choices=("init", "show", "export", "rotate", "export-private", "import-private"),
        help="init: make the key pair once; show: its id and signer; export: write the public key; "
        "rotate: retire it, make a new one and re-sign the release folders; export-private --to DIR: "
        "the randomness and agency keys, encrypted with a passphrase (DPRELEASE_KEY_PASSPHRASE or a "
        "prompt); import-private --from DIR: install them in this clone",
    )
    ke.add_argument(
        "--params",
        default=params_file(),
        help="the params file naming the artifacts folder (default: $DPRELEASE_PARAMS or params.yaml)",
    )
    ke.add_argument("--signer", default=None, help="the name releases are signed as (init, rotate)")
    ke.add_argument("--output", default=None, help="export: where to write the public key (e.g. agency.pub)")
    ke.add_argument("--to", default=None, help="export-private: a new folder for the encrypted keys (made 0700)")
    ke.add_argument("--from", dest="source", default=None, help="import-private: the folder export-private wrote")
    ke.add_argument(
        "--new-key",
        action="store_true",
        help="init: make a new agency key even where dvc.lock records another (a rotation, recorded)",
    )
    dv = sub.add_parser("dvc-yaml", help="regenerate dvc.yaml from the stage registry")
    dv.add_argument(
        "--params", default=params_file(), help="the params file (default: $DPRELEASE_PARAMS or params.yaml)"
    )
    dv.add_argument("--output", default="dvc.yaml", help="where to write it (default: dvc.yaml)")
    ix = sub.add_parser(
        "plugin-index",
        help="regenerate the plug-in index (which package declares each stage, flow and sanitizer) from the plug-ins",
    )
    ix.add_argument(
        "--params", default=params_file(), help="the params file (default: $DPRELEASE_PARAMS or params.yaml)"
    )
    ix.add_argument(
        "--output", default=None, help="a folder to write the fragments under (default: each package's own folder)"
    )
    tr = sub.add_parser("track", help="log the finished pipeline run to MLflow")
    tr.add_argument(
        "--params", default=params_file(), help="the params file (default: $DPRELEASE_PARAMS or params.yaml)"
    )
    se = sub.add_parser("secret", help="the randomness key the guarantees' noise comes from (private artifacts)")
    se.add_argument(
        "action",
        choices=("init", "rotate", "show"),
        help="init: create it if missing; rotate: retire it and start a new one (the next release is a "
        "new release); show: print its public id",
    )
    se.add_argument(
        "--params",
        default=params_file(),
        help="the params file naming the artifacts folder (default: $DPRELEASE_PARAMS or params.yaml)",
    )
    args = parser.parse_args(argv)
    offline.quiet()
    interrupted: list[int] = []
    main_thread = threading.current_thread() is threading.main_thread()  # only there may a handler be set
    previous = signal.signal(signal.SIGINT, partial(_interrupt, interrupted)) if main_thread else None
    try:
        if args.command == "stage":
            from dprelease.core.locks import root_lock
            from dprelease.pipeline.registry import run_stage

            params = load_params(args.params)
            with root_lock(".", f"dprelease stage {args.name}"):
                summary = run_stage(args.name, params)
            print(f"{args.name}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in summary.items()))
        elif args.command == "predict":
            from dprelease.core.release.folder import predict

            key, check = _signature_options(args)
            n = predict(
                args.release,
                args.input,
                args.output,
                args.text_column,
                args.device,
                args.encoding,
                key=key,
                column_prefix=args.column_prefix,
                signature_check=check,
                force=args.force,
            )
            print(f"coded {n} narratives -> {args.output}")
        elif args.command == "sanitize":
            from dprelease.core.release.sanitizer import sanitize_file
            from dprelease.pipeline.registry import sanitizer

            key, check = _signature_options(args)
            n, meta = sanitize_file(
                args.release,
                args.input,
                args.output,
                lookup=sanitizer,
                text_column=args.text_column,
                encoding=args.encoding,
                seed=args.seed,
                key=key,
                signature_check=check,
            )
            eps = f", ε={meta['epsilon']:.4g}" if isinstance(meta.get("epsilon"), (int, float)) else ", no ε claimed"
            print(f"sanitized {n} narratives with the {meta['mechanism']} release{eps} -> {args.output}")
        elif args.command == "verify":
            from dprelease.core.release.signing import key_from_env
            from dprelease.core.release.verify import summary, verify_folder

            print(summary(verify_folder(args.release, args.key or key_from_env())))
        elif args.command == "key":
            from dprelease.core.release.keys_cli import key_command

            for line in key_command(
                args.action,
                load_params(args.params),
                signer=args.signer,
                output=args.output,
                to=args.to,
                source=args.source,
                new_key=args.new_key,
            ):
                print(line)
        elif args.command == "dvc-yaml":
            import yaml

            from dprelease.core.io import atomic_path
            from dprelease.pipeline.registry import dvc_yaml

            text = "# Generated by `dprelease dvc-yaml` from the stage registry (dprelease.pipeline.registry); do not edit.\n"
            text += yaml.safe_dump(dvc_yaml(load_params(args.params)), sort_keys=False, width=120)
            with atomic_path(args.output) as tmp:
                tmp.write_text(text, encoding="utf-8")
            print(f"wrote {args.output}")
        elif args.command == "plugin-index":
            from dprelease.pipeline.registry import write_index

            written = write_index(load_params(args.params), root=args.output)
            print(f"wrote {len(written)} plug-in index fragments ({written[0].name} in each package's folder)")
        elif args.command == "secret":
            from dprelease.core.privacy import secret

            artifacts = load_params(args.params).artifacts
            if args.action == "rotate":
                old, new = secret.rotate(artifacts)
                print(
                    f"randomness key rotated: {old or 'none'} -> {new} (retired keys stay private under "
                    f"{artifacts}/secret/retired; the stages that use the key will re-run)"
                )
            else:
                kid = secret.init(artifacts) if args.action == "init" else secret.key_id(artifacts)
                print(f"randomness key id {kid}")
        elif args.command == "track":
            from dprelease.core.locks import root_lock
            from dprelease.pipeline.tracking import log_pipeline_run

            params = load_params(args.params)
            with root_lock(".", "dprelease track"):
                run_id = log_pipeline_run(params)
            print(f"MLflow run {run_id}")
    except BaseException as err:
        if interrupted or isinstance(err, KeyboardInterrupt):  # Ctrl-C, even where a library re-raised it as its own
            # error (pandas' CSV reader does): one line; every output is written whole (a renamed temporary) or not at all
            print(f"dprelease: interrupted: {args.command} stopped; no partial output is left", file=sys.stderr)
            return 130
        if isinstance(err, OSError) and not isinstance(err, FileNotFoundError):  # a full disk, a read-only folder
            print(f"dprelease: error: {os_error_line(err)}", file=sys.stderr)
            return 2
        if not isinstance(err, (OneLineError, KeyError, FileNotFoundError, ValueError)):
            raise
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"dprelease: error: {msg}", file=sys.stderr)
        return 2
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
        if argv is None:  # the console script, about to exit: no last collection over torch's objects (0.3-1 s)
            gc.freeze()
    return 0


def load_params(path: str):
    """The typed params (pydantic, imported here: the commands that never read params start without it)."""
    from dprelease.core.config import load_params as load

    return load(path)


def _interrupt(interrupted: list[int], signum, frame) -> None:
    interrupted.append(signum)
    raise KeyboardInterrupt


KEY_HELP = (
    "the agency's public key (agency.pub, from the agency, not from the release; default: the file "
    "DPRELEASE_AGENCY_KEY names): a release it did not sign is refused, and so is any release when there "
    "is no key"
)
NO_CHECK_HELP = (
    "load the release without checking who signed it (only its files against its manifest, which "
    "anyone can rewrite); says so on stderr every time"
)


def _signature_options(args) -> tuple[str | None, bool]:
    """(public key, whether to check the signature) for predict and sanitize: ``--key``, else the file
    DPRELEASE_AGENCY_KEY names (the loader refuses when there is neither); ``--no-signature-check`` turns
    the check off, with a one-line warning on stderr every time."""
    from dprelease.core.errors import ConfigError
    from dprelease.core.release.signing import key_from_env

    if not args.no_signature_check:
        return args.key or key_from_env(), True
    if args.key:
        raise ConfigError("--key and --no-signature-check contradict each other: give one of them")
    print(
        f"dprelease: warning: --no-signature-check: who published {args.release} is NOT checked (its files are "
        "checked only against its manifest, which anyone can rewrite)",
        file=sys.stderr,
    )
    return None, False


def _fmt(v) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_fmt(x)}" for k, x in v.items() if not isinstance(x, dict)) + "}"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    sys.exit(main())
