"""``python -m flows.audit [--params params.yaml] [--set KEY=VALUE] [--no-track]`` (``make audit``): the plug-in flow
``audit`` run by the generic graph runner (:mod:`flows.run`). Membership inference and the one-run canary audit of
every audited arm; the model card then carries the audit."""

from __future__ import annotations

import sys

from flows.run import main as run_main


def main(argv: list[str] | None = None) -> int:
    return run_main(argv, name="audit")


def audit_stages(params) -> list[str]:
    """What the audit adds after the release stages (the retrain flow audits the arm it released)."""
    from dprelease.pipeline import registry
    from flows.run import plan_of

    release = {s.name for s in registry.group(params, "release", active_only=False)} - {"publish"}
    return [n for n in plan_of(registry.flows()["audit"], params).order if n not in release]


if __name__ == "__main__":
    sys.exit(main())
