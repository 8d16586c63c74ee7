"""Privacy-audit flow: membership inference and the one-run canary audit of every comparison arm.

``python -m flows.audit [--params params.yaml] [--set privacy_audit.references=32] [--no-track]``

The release and the comparison arms are the same cached tasks as in the release and compare flows
(reused when they are done); then the registry's ``audit`` stages: population pool + canaries, LiRA
reference models, membership inference per arm, one canary run per arm, and ``reports/privacy/``.
"""

from __future__ import annotations

import sys
import time

from dprelease import offline  # noqa: F401  (offline switches before transformers loads)
from dprelease import registry
from dprelease.config import ConfigError, Params
from dprelease.layout import Layout
from flows import cli
from flows.compare import check_arms
from prefect import flow
from tasks.stages import run

ARM_STAGES = {"nonprivate": "nonprivate", "swag_ppm": "swag_ppm", "dpsgd": "dpsgd"}


def check(params: Params) -> None:
    arms = params.privacy_audit.arms
    if "swag_ppm_reweighted" in arms and not params.ppm.reweight:
        raise ConfigError("privacy_audit.arms: swag_ppm_reweighted needs ppm.reweight: true")
    check_arms(params)


def audit_stages(p: Params) -> list[str]:
    """What follows the release stages: the audited arms' own stages, the audit stages, then ``publish``
    (the model card carries the audit)."""
    arms = [stage for arm, stage in ARM_STAGES.items() if arm in p.privacy_audit.arms]
    return arms + [spec.name for spec in registry.group(p, "audit")] + ["publish"]


@flow(name="privacy-audit", log_prints=False, persist_result=False)
def audit_flow(params: dict, root: str = ".", track: bool = True) -> dict:
    p = Params.model_validate(params)
    out: dict = {"timings": {}}

    def timed(name: str) -> None:
        start = time.perf_counter()
        out[name] = run(name, p, root)
        cli.record_time(out["timings"], p, name, time.perf_counter() - start)

    for spec in registry.group(p, "release"):
        timed(spec.name)
    for name in audit_stages(p):
        timed(name)
    if track:
        from dprelease.tracking import log_audit_run

        cli.tracked(out, lambda: log_audit_run(p, root))
    return out


def main(argv: list[str] | None = None) -> int:
    args = cli.parser(__doc__).parse_args(argv)
    start = time.perf_counter()
    code, params, result = cli.run(args, check, lambda p: audit_flow(p.model_dump(mode="json"), args.root,
                                                                      not args.no_track))
    if code:
        return code
    report = Layout.from_params(params, args.root).reports / "privacy" / "report.md"
    cli.print_report(report, result, time.perf_counter() - start, "arm")
    print("per stage: " + ", ".join(f"{k} {v:.1f}s" for k, v in result["timings"].items()))
    return cli.tracking_status(result, "privacy audit")


if __name__ == "__main__":
    sys.exit(main())
