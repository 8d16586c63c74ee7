"""Writing the SWAG-PPM release (docs/algorithms.md, B.7b): the ``draw`` stage (the ONE released draw θ* of the
released round, staged as the release folder with its manifest and code version), the manifest itself and the
comparison arm ``swag_ppm``. The draw and its guarantee are ``rounds.py``'s; this module adds the release format
and signing code (``release/``), which the posterior passes' code therefore never holds."""

from __future__ import annotations

from pathlib import Path

from safetensors.torch import save_file

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data.splits import label_info
from dprelease.core.io import atomic_dir, read_json, write_json
from dprelease.core.privacy import guarantee
from dprelease.core.release import manifest
from dprelease.core.release.folder import write_arm_model, write_release
from dprelease.core.utility.evaluate import write_arm
from dprelease.mechanisms.swag_ppm import claim
from dprelease.mechanisms.swag_ppm.params import ppm_finetune, swag_settings
from dprelease.mechanisms.swag_ppm.reweighting import released_round
from dprelease.mechanisms.swag_ppm.rounds import SECRET_NOISE, _draw, draw_from_round

MECHANISM = "swag_ppm"  # the name released.mechanism gives it (its ReleaseSpec's)


def draw(params: Params, root: str | Path = ".") -> dict:
    """ONE independent draw θ* from the released round's SWAG; its own M* enters Δ̂ (docs/algorithms.md, B.7b step 7)."""
    lay = Layout.from_params(params, root)
    r = released_round(params, lay)
    backend, model, theta, m_star, g, tail = _draw(params, lay, r, "release")
    labels = label_info(lay)
    with atomic_dir(lay.draw, private=True) as tmp:
        save_file({"theta": theta.cpu().contiguous()}, str(tmp / "theta.safetensors"))
        # the release as it will be shared, staged privately: the privacy audit loads it from here and
        # the `publish` stage adds the model card and writes it to params.release
        write_release(
            tmp / "release",
            backend,
            model,
            labels["codes"],
            labels["titles"],
            release_manifest(params, lay, g, tail),
            closure(__name__),
        )
    summary = {"round": r, "released_draw_max_loss": m_star, "guarantee": g.as_dict(), "local_sensitivity_tail": tail}
    write_json(lay.metrics / "swag_ppm_draw.json", summary)
    return summary


def release_manifest(params: Params, lay: Layout, g: guarantee.Guarantee, tail: dict | None = None) -> dict:
    """The public manifest of a SWAG-PPM release: the common fields from the one builder
    (:func:`dprelease.core.release.manifest.release_manifest`; no ``test_f1``: the draw is evaluated after it is
    staged) and SWAG-PPM's own: its configuration, the released round's aggregates and its claim."""
    p, data = params.ppm, read_json(lay.metrics / "data.json")
    r = g.quantities["round"]  # statistics of the released round only: an unreleased round's stay private
    own = {
        "released_from_round": r,
        "temperature": read_json(lay.metrics / f"temperature_r{r}.json")["temperature"],
        "calibration": p.calibration,
        "prior_precision": p.prior_precision,
        "variant": p.mechanism,  # asymptotic | censored (``mechanism`` is the name released.mechanism gives it)
        "censor_epsilon": p.censor_epsilon,
        "c": p.c,
        "g": p.g,
        "reweight": params.ppm.reweighting,
        "risk_norm": p.risk_norm,
        "draws": p.draws,
        "smoke_test": p.smoke_test,
        "dataset": {
            "classes": data["public"]["classes"],
            "until": data["public"]["until"],  # public figures only
            "expected_train_size": data["public"]["expected_train_size"],
        },
        "knobs_that_move_epsilon": epsilon_knobs(params),
    }
    if params.ppm.reweighting:
        rw = read_json(lay.metrics / "reweight.json")
        own["reweighting"] = {
            "mode": p.reweight_mode,
            "k": p.k if p.reweight_mode == "oneshot" else None,
            "step": p.reweight_step if p.reweight_mode == "iterative" else None,
            "tolerance": p.reweight_tolerance if p.reweight_mode == "iterative" else None,
            "max_refits": p.max_refits if p.reweight_mode == "iterative" else 1,
            **{key: rw[key] for key in ("accepted", "released_round", "reason")},
        }
    if tail is not None:
        own["local_sensitivity_uncertainty"] = tail
    if g.kind in claim.KINDS:  # the headline as quoted (card, MLflow), the point figure beside it, the coverage
        own["claim"] = claim.summary(g)
    return manifest.release_manifest(
        params,
        lay,
        g,
        mechanism=MECHANISM,
        backend=params.model.backend,
        test_f1=None,
        randomness={
            "public_seed_drives": "the stratified split and the audit's choice of target records only",
            "secret_key_drives": "initialisation, batch order, dropout, SWAG's SGD, re-weighting refits, "
            "Δ̂ and evaluation passes, the released draw",
            "released_draw": SECRET_NOISE,
        },
        **own,
    )


def epsilon_knobs(params: Params) -> dict:
    """The settings that are not the data but move Δ̂ and so ε (``make epsilon-sensitivity`` measures how much);
    a reviewer checks that they were fixed before ε was seen."""
    sw, ft, p = swag_settings(params), ppm_finetune(params), params.ppm
    out = {
        "swag_lr": sw.lr,
        "swag_epochs": sw.epochs,
        "swag_batch_size": sw.batch_size,
        "swag_momentum": sw.momentum,
        "swag_rank": sw.rank,
        "finetune_epochs": ft.epochs,
        "finetune_lr": ft.lr,
        "finetune_batch_size": ft.batch_size,
        "calibration": p.calibration,
        "prior_precision": p.prior_precision,
        "c": p.c,
        "g": p.g,
        "risk_norm": p.risk_norm,
        "draws": p.draws,
        "reweighting": None,
    }
    if params.ppm.reweighting:
        out["reweighting"] = {
            "mode": p.reweight_mode,
            "step": p.reweight_step,
            "aim": p.reweight_aim,
            "tolerance": p.reweight_tolerance,
            "target": p.reweight_target,
            "max_refits": p.max_refits,
            "k": p.k,
            "form": p.reweight_form,
        }
    return out


def round2_arm(params: Params, root: str | Path = ".") -> dict:
    """Comparison arm ``swag_ppm``: an independent draw from SWAG 2 (what the release is with
    ``ppm.reweight: false``), with its own M* in Δ̂, evaluated on the test split."""
    lay = Layout.from_params(params, root)
    backend, model, _, _, g = draw_from_round(params, lay, 2, tag="swag_ppm")  # not the release's draw
    write_arm_model(lay, "swag_ppm", backend, model, g, closure(__name__))
    return write_arm(lay, "swag_ppm", backend, model, label_info(lay), g, {"round": 2})
