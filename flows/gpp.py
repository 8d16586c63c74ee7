"""``python -m flows.gpp [--params params.yaml] [--set KEY=VALUE] [--no-track]`` (``make gpp``): the plug-in flow
``gpp`` run by the generic graph runner (:mod:`flows.run`). The Gaussian Privacy Protector on digits and on the OSHA
narratives, centralized and on Flower, its probe audit, report and sanitizer release."""

from __future__ import annotations

import sys

from flows.run import main as run_main


def main(argv: list[str] | None = None) -> int:
    return run_main(argv, name="gpp")


if __name__ == "__main__":
    sys.exit(main())
