"""Stage ``frontier_report`` (docs/frontier.md): every source's points (``metrics/frontier/<source>.json``, written
by the stages the packages name in ``FRONTIER``) → ``reports/frontier/``: frontier.csv, frontier.png/.svg,
report.md and recommendation.json. Its deps are the sources' point files, so the frontier flow's plan holds the
stages that write them; the audit's table is evidence (used when present, never produced for it)."""

from __future__ import annotations

from dprelease.compare.frontier.report import frontier_report, sources
from dprelease.contracts import plugins
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params
from dprelease.core.errors import ConfigError
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.utility.points import FOLDER

AUDIT = "reports/privacy/audit.csv"


def check(params: Params) -> None:
    known = plugins.frontier_sources()
    unknown = sorted(set(params.frontier.sources or ()) - set(known))
    if unknown:
        raise ConfigError(f"frontier.sources: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    if params.model.backend != "head":
        raise ConfigError("frontier: needs model.backend: head (the points train on the frozen encoder's embeddings)")


def declare(params: Params) -> list[Stage]:
    deps = [key_id_file(params), "metrics/data.json", *(f"{FOLDER}/{s}.json" for s in sources(params))]
    return [
        Stage(
            name="frontier_report",
            run=frontier_report,
            params=["frontier"],
            deps=deps,
            outs=["reports/frontier"],
            evidence=[AUDIT],
            group="frontier",
        )
    ]
