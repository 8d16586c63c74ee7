"""Command line: ``dprelease stage NAME`` (what dvc.yaml runs), ``dprelease predict``, ``dprelease sanitize``,
``dprelease verify`` (a release's signature), ``dprelease key`` (the agency signing key), ``dprelease track``,
``dprelease dvc-yaml`` and ``dprelease secret init|rotate|show`` (the randomness key)."""

from __future__ import annotations

import argparse
import sys

from . import offline
from .config import load_params
from .errors import OneLineError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dprelease", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("stage", help="run one pipeline stage (as dvc.yaml does)")
    st.add_argument("name", help="the stage to run (its name in dvc.yaml)")
    st.add_argument("--params", default="params.yaml", help="the params file (default: params.yaml)")
    pr = sub.add_parser("predict", help="code narratives with a release folder")
    pr.add_argument("--release", required=True, help="the release folder (holds release.json)")
    pr.add_argument("--input", required=True, help="a CSV of narratives (bundled or OSHA format)")
    pr.add_argument("--output", required=True, help="the CSV to write: the input plus code, title, probability")
    pr.add_argument("--text-column", default=None,
                    help="the narrative column (default: Final Narrative, narrative or text, the first present)")
    pr.add_argument("--device", default="cpu", help="torch device for scoring: cpu (default), cuda or mps")
    pr.add_argument("--encoding", choices=("auto", "utf-8", "cp1252"), default="auto",
                    help="input CSV encoding; auto: UTF-8, or cp1252 for a file with no UTF-8 multi-byte text")
    pr.add_argument("--key", default=None, help=KEY_HELP)
    pr.add_argument("--column-prefix", default="",
                    help="put this before the new columns' names (code, title, probability): for an input that "
                         "already has columns of those names, which predict never overwrites")
    sa = sub.add_parser("sanitize", help="privatize narratives with a sanitizer release (one draw each, parquet)")
    sa.add_argument("--release", required=True, help="the sanitizer release folder")
    sa.add_argument("--input", required=True, help="a CSV of narratives to privatize")
    sa.add_argument("--output", required=True, help="a .parquet file: input row number + the privatized draws")
    sa.add_argument("--text-column", default=None,
                    help="the narrative column (default: Final Narrative, narrative or text, the first present)")
    sa.add_argument("--encoding", choices=("auto", "utf-8", "cp1252"), default="auto",
                    help="input CSV encoding; auto: UTF-8, or cp1252 for a file with no UTF-8 multi-byte text")
    sa.add_argument("--seed", type=int, default=None,
                    help="for tests only: a known seed lets anyone who knows it undo the noise (default: OS entropy)")
    sa.add_argument("--key", default=None, help=KEY_HELP)
    ve = sub.add_parser("verify", help="check a release folder's signature and files against the agency's public key")
    ve.add_argument("--release", required=True, help="the release folder to check (classifier or sanitizer)")
    ve.add_argument("--key", required=True, help="the agency's public key (agency.pub)")
    ke = sub.add_parser("key", help="the agency signing key: init (once), show, export (the public key), rotate")
    ke.add_argument("action", choices=("init", "show", "export", "rotate"),
                    help="init: make the key pair once; show: its id and signer; export: write the public key; "
                         "rotate: retire it, make a new one and re-sign the release folders")
    ke.add_argument("--params", default="params.yaml", help="the params file naming the artifacts folder")
    ke.add_argument("--signer", default=None, help="the name releases are signed as (init, rotate)")
    ke.add_argument("--output", default=None, help="export: where to write the public key (e.g. agency.pub)")
    dv = sub.add_parser("dvc-yaml", help="regenerate dvc.yaml from the stage registry")
    dv.add_argument("--params", default="params.yaml", help="the params file (default: params.yaml)")
    dv.add_argument("--output", default="dvc.yaml", help="where to write it (default: dvc.yaml)")
    tr = sub.add_parser("track", help="log the finished pipeline run to MLflow")
    tr.add_argument("--params", default="params.yaml", help="the params file (default: params.yaml)")
    se = sub.add_parser("secret", help="the randomness key the guarantees' noise comes from (private artifacts)")
    se.add_argument("action", choices=("init", "rotate", "show"),
                    help="init: create it if missing; rotate: retire it and start a new one (the next release is a "
                         "new release); show: print its public id")
    se.add_argument("--params", default="params.yaml", help="the params file naming the artifacts folder")
    args = parser.parse_args(argv)
    offline.quiet()
    try:
        if args.command == "stage":
            from .locks import root_lock
            from .registry import run_stage

            params = load_params(args.params)
            with root_lock(".", f"dprelease stage {args.name}"):
                summary = run_stage(args.name, params)
            print(f"{args.name}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in summary.items()))
        elif args.command == "predict":
            from .release import predict

            n = predict(args.release, args.input, args.output, args.text_column, args.device, args.encoding,
                        key=args.key, column_prefix=args.column_prefix)
            print(f"coded {n} narratives -> {args.output}")
            _unsigned_note(args.key)
        elif args.command == "sanitize":
            from .registry import sanitizer
            from .sanitizer import sanitize_file

            n, meta = sanitize_file(args.release, args.input, args.output, lookup=sanitizer,
                                    text_column=args.text_column, encoding=args.encoding, seed=args.seed, key=args.key)
            eps = (f", ε={meta['epsilon']:.4g}" if isinstance(meta.get("epsilon"), (int, float))
                   else ", no ε claimed")
            print(f"sanitized {n} narratives with the {meta['mechanism']} release{eps} -> {args.output}")
            _unsigned_note(args.key)
        elif args.command == "verify":
            from .verify import summary, verify_folder

            print(summary(verify_folder(args.release, args.key)))
        elif args.command == "key":
            from .keys_cli import key_command

            for line in key_command(args.action, load_params(args.params), signer=args.signer, output=args.output):
                print(line)
        elif args.command == "dvc-yaml":
            import yaml

            from .io import atomic_path
            from .registry import dvc_yaml

            text = "# Generated by `dprelease dvc-yaml` from the stage registry (dprelease.registry); do not edit.\n"
            text += yaml.safe_dump(dvc_yaml(load_params(args.params)), sort_keys=False, width=120)
            with atomic_path(args.output) as tmp:
                tmp.write_text(text, encoding="utf-8")
            print(f"wrote {args.output}")
        elif args.command == "secret":
            from .privacy import secret

            artifacts = load_params(args.params).artifacts
            if args.action == "rotate":
                old, new = secret.rotate(artifacts)
                print(f"randomness key rotated: {old or 'none'} -> {new} (retired keys stay private under "
                      f"{artifacts}/secret/retired; the stages that use the key will re-run)")
            else:
                kid = secret.init(artifacts) if args.action == "init" else secret.key_id(artifacts)
                print(f"randomness key id {kid}")
        elif args.command == "track":
            from .tracking import log_pipeline_run

            from .locks import root_lock

            params = load_params(args.params)
            with root_lock(".", "dprelease track"):
                run_id = log_pipeline_run(params)
            print(f"MLflow run {run_id}")
    except (OneLineError, KeyError, FileNotFoundError, ValueError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"dprelease: error: {msg}", file=sys.stderr)
        return 2
    return 0


KEY_HELP = ("the agency's public key (agency.pub): refuse a release it did not sign; without it the files are "
            "checked against the manifest, not who published them")


def _unsigned_note(key) -> None:
    if key is None:
        print("dprelease: note: no --key given: the release's files match its manifest, but who signed it was not "
              "checked (see `dprelease verify`)", file=sys.stderr)


def _fmt(v) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_fmt(x)}" for k, x in v.items() if not isinstance(x, dict)) + "}"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    sys.exit(main())
