"""GPP flow (issue 12): the Gaussian Privacy Protector on digits and on the OSHA narratives, centralized
and distributed on Flower, its audit, report and sanitizer release.

``python -m flows.gpp [--params params.yaml] [--set gpp.epochs=20] [--no-track]``  (``make gpp``)

Stages (cached like every other flow): ``stratify`` and ``featurize`` (the release pipeline's split and
MiniLM features, which the OSHA setting reuses), then the registry's ``gpp`` group: ``gpp_digits``,
``gpp_osha``, ``gpp_release``, ``gpp_report``. MLflow gets a parent run with one child per dataset
(aggregates only). Writes ``reports/gpp/table.csv``, ``reports/gpp/report.md`` and the release folder
``gpp.release``.
"""

from __future__ import annotations

import sys
import time

from dprelease import offline  # noqa: F401  (offline switches before transformers loads)
from dprelease import registry
from dprelease.config import ConfigError, Params
from dprelease.layout import Layout
from flows import cli
from prefect import flow
from tasks.stages import run

DATA_STAGES = ("stratify", "featurize")


def check(params: Params) -> None:
    if params.gpp.osha.enabled and params.model.backend != "head":
        raise ConfigError("gpp.osha needs model.backend: head (the cached MiniLM embeddings)")


def gpp_stages(p: Params) -> list[str]:
    data = list(DATA_STAGES) if p.gpp.osha.enabled else []
    return data + [spec.name for spec in registry.group(p, "gpp")]


@flow(name="gpp", log_prints=False, persist_result=False)
def gpp_flow(params: dict, root: str = ".", track: bool = True) -> dict:
    p = Params.model_validate(params)
    out: dict = {"timings": {}}
    for name in gpp_stages(p):
        start = time.perf_counter()
        out[name] = run(name, p, root)
        out["timings"][name] = round(time.perf_counter() - start, 2)
    if track:
        from dprelease.tracking_experiments import log_gpp_run

        cli.tracked(out, lambda: log_gpp_run(p, root, out["timings"]))
    return out


def main(argv: list[str] | None = None) -> int:
    args = cli.parser(__doc__).parse_args(argv)
    start = time.perf_counter()
    code, params, result = cli.run(args, check, lambda p: gpp_flow(p.model_dump(mode="json"), args.root,
                                                                    not args.no_track))
    if code:
        return code
    report = Layout.from_params(params, args.root).reports / "gpp" / "report.md"
    cli.print_report(report, result, time.perf_counter() - start, "dataset")
    print("per stage: " + ", ".join(f"{k} {v:.1f}s" for k, v in result["timings"].items()))
    return cli.tracking_status(result, "GPP report")


if __name__ == "__main__":
    sys.exit(main())
