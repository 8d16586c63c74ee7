"""The public model's stages: ``frontier_public``, the floor of the frontier (ε = 0 with respect to the private
reports), and ``public_release``, the model staged as a release (published when ``released.mechanism: public_only``).

The frontier point's ``proxy_weighted_f1`` is the public model fit on ``public_rest`` scored on ``proxy_validation``:
the same simulation a DP mechanism's proxy score comes from, without the pseudo-private set, so the recommendation
compares like with like and reads no private report. Its test figures are exact (the frontier is the operator's
internal analysis); the model is deterministic, so its seed spread is 0."""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import ReleaseSpec
from dprelease.contracts.stage import Stage
from dprelease.core import public_fit
from dprelease.core.config import Params
from dprelease.core.data.splits import head_embeddings, label_info
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.public_model import predict
from dprelease.core.utility.metrics import f1_summary
from dprelease.core.utility.points import PUBLIC_PROXY, Point, write_points
from dprelease.mechanisms.public_only import released

SPEC = ReleaseSpec(
    mechanism="public_only",
    stage="public_release",
    staged=released.staged,
    card=released.card,
    figures=released.figures,
    code=lambda: closure(released.__name__),
    settings=lambda params: {},  # its release reads the shared sections only (model, released, proxy, public_model)
)

SOURCE = "public_only"
WHO = "the public model's frontier point"


def frontier_public(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    if not public_fit.available(lay):  # no public period declared: no floor to draw (the frontier says so)
        write_points(root, SOURCE, [], grid_size=1, selection="no public period (proxy.until): no public model")
        return {"points": 0}
    k = range(len(label_info(lay)["codes"]))
    sim = public_fit.simulation(lay, grid=params.public_model.l2, who=WHO)
    w, b = public_fit.release(lay, l2=sim.l2, who=WHO)
    (xv, yv), (xs, ys) = (head_embeddings(lay, s, who=WHO) for s in ("validation", "test"))
    test = f1_summary(ys.numpy(), predict(w, b, xs).numpy(), k)
    val = f1_summary(yv.numpy(), predict(w, b, xv).numpy(), k)["weighted_f1"]
    point = Point(
        mechanism="public_model",
        label="the public model (reads no private report)",
        kind="public_only",
        epsilon=0.0,
        delta=None,
        accountant="— (no private report read)",
        weighted_f1=[test["weighted_f1"]],
        macro_f1=[test["macro_f1"]],
        validation_weighted_f1=val,
        tuning=PUBLIC_PROXY,
        proxy_weighted_f1=sim.score,
        config={"l2": sim.l2, "l2_grid": list(params.public_model.l2)},
    )
    write_points(
        root,
        SOURCE,
        [point],
        grid_size=len(params.public_model.l2),
        selection=f"L2 of softmax regression, best of {len(params.public_model.l2)} on the public proxy's "
        "validation part (zero ε); deterministic (L-BFGS from zero): one fit",
    )
    return {"points": 1, "public_model": round(test["weighted_f1"], 4), "proxy": round(sim.score, 4)}


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    deps = [key_id_file(params), f"{a}/data", f"{a}/features"]
    return [
        Stage(
            name="frontier_public",
            run=frontier_public,
            params=["model.backend", "public_model", "proxy"],
            deps=deps,
            outs=[],
            metrics=["metrics/frontier/public_only.json"],
            group="frontier",
        ),
        Stage(
            name="public_release",
            run=released.public_release,
            params=["seed", "model", "released", "proxy", "public_model"],
            deps=deps,
            outs=[f"{a}/{released.FOLDER}"],
            group="public_only",
        ),
    ]
