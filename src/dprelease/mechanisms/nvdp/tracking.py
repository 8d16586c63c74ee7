"""NVDP's MLflow record, as plain data (:class:`dprelease.contracts.mechanism.TrackedRun`; this package never imports
MLflow): a parent run with the ``nvdp.*`` params and a child per task × variant with one metric step per λ, read
from the aggregates table ``reports/nvdp/table.csv`` (a file, not an import); the report, table and figure attached."""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import TrackedRun
from dprelease.contracts.stage import flat
from dprelease.core.config import Params

METRICS = (
    "score",
    "bdp_epsilon",
    "rd_max",
    "rd_avg",
    "rd_max_filtered",
    "rd_avg_filtered",
    "bdp_nan_terms_zeroed",
    "rd_nan_pairs",
)
GUARANTEES = (
    "NVDP: no finite ε claimed; bdp_epsilon is the reference accountant's figure, not an ε (see the "
    "sanitizer card); RD bound over test pairs"
)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def tracked_run(params: Params, root: str | Path, timings: dict | None = None) -> TrackedRun:
    """The NVDP flow's record (``timings`` unused: the parent run holds the experiments, not the stages)."""
    import pandas as pd

    out = Layout.from_params(params, root).reports / "nvdp"
    df = pd.read_csv(out / "table.csv")
    children = []
    for (task, variant), g in df.groupby(["task", "variant"], sort=False):
        steps = []
        for row in g.sort_values("lambda").itertuples(index=False):
            values = {m: float(getattr(row, m)) for m in METRICS if _is_number(getattr(row, m))}
            lam = row[2]
            if _is_number(lam) and lam == lam:
                values["lambda"] = float(lam)
            steps.append({k: v for k, v in values.items() if v == v})
        children.append(TrackedRun(name=f"nvdp {task} {variant}", tags={"task": task, "variant": variant}, steps=steps))
    return TrackedRun(
        name="nvdp",
        params=flat(params, ["nvdp", "seed"]),
        tags={"guarantees": GUARANTEES},
        children=children,
        artifacts=[(path, "nvdp") for path in sorted(out.glob("*"))],
    )
