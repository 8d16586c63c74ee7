"""The comparison arms as stages (non-private, SWAG-PPM round 2, DP-SGD at the declared target ε, its δ sweep) on
the head slice, DP-SGD on the full-tiny slice in both Opacus modes, and bad DP-SGD / arm settings rejected
before anything trains.

The SWAG-PPM release comes from the session fixtures (``head_run``, ``full_run``); the arms run on copies of
their roots (``arms_run`` in conftest, or a copy made here), so nothing is written into a shared root.
"""

from __future__ import annotations

import math
import stat
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from conftest import ARM_STAGES, compare_raw, copy_root, run_stages

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import get_flat
from dprelease.core.config import ConfigError, parse_params
from dprelease.core.io import read_json
from dprelease.core.utility.metrics import PER_CLASS_COLUMNS
from dprelease.mechanisms.dpsgd import stages as baselines

pytestmark = pytest.mark.slow

ARM_DIRS = ["nonprivate", "swag_ppm", "dpsgd"]  # arms with their own reports/arms/<arm>/ tables


def _flat(path) -> dict:
    """An arm's metrics with its guarantee record's ε, δ (or the reason there is none) and quantities
    flattened in, for terse assertions."""
    m = read_json(path)
    g = m["guarantee"]
    return {
        **m,
        "epsilon": g["epsilon"],
        "delta": g["delta"] if g["delta"] is not None else g["delta_reason"],
        **g["quantities"],
    }


def _n_train(root) -> int:
    """The PUBLIC expected training size n̂ that δ, the sampling rate and the normaliser use (never the private n)."""
    return read_json(root / "metrics/data.json")["public"]["expected_train_size"]


def _default_delta(n: int) -> float:
    """DP-SGD's default δ = min(n^-1.1, 1/(2n)) (docs/algorithms.md, E.1; was 1/(2n)): n^-1.1 = exp(-1.1·ln n)
    once n > 1,024; a slice this small (24 training records: 24^-1.1 = exp(-3.4958) = 0.0303 > 1/48 = 0.0208)
    keeps 1/(2n)."""
    return min(math.exp(-1.1 * math.log(n)), 1 / (2 * n))


@pytest.fixture
def spy(monkeypatch):
    """Record every DP-SGD training run of the arms: its arguments, result, and θ before and after."""
    real = baselines.train_dpsgd
    runs: list[SimpleNamespace] = []

    def recorded(backend, model, features, labels, **kwargs):
        theta0 = get_flat(model).clone()
        result = real(backend, model, features, labels, **kwargs)
        runs.append(SimpleNamespace(kwargs=kwargs, result=result, theta0=theta0, theta=get_flat(model).clone()))
        return result

    monkeypatch.setattr(baselines, "train_dpsgd", recorded)
    return runs


# the arms on the head slice ---------------------------------------------------------------------------------------
def test_arms_write_metrics_with_f1_in_range(arms_run):
    for arm in ("nonprivate", "swag_ppm", "dpsgd"):
        assert read_json(arms_run.path(f"metrics/{arm}.json")) == arms_run.summaries[arm]
        m = _flat(arms_run.path(f"metrics/{arm}.json"))
        assert m["arm"] == arm
        for key in (
            "weighted_f1",
            "macro_f1",
            "top_quartile_weighted_f1",
            "top_quartile_macro_f1",
            "bottom_quartile_weighted_f1",
            "bottom_quartile_macro_f1",
        ):
            assert 0.0 <= m[key] <= 1.0, (arm, key, m[key])
    sweep = read_json(arms_run.path("metrics/dpsgd_sweep.json"))
    for row in sweep["rows"]:
        assert 0.0 <= row["weighted_f1"] <= 1.0 and 0.0 <= row["macro_f1"] <= 1.0, row


@pytest.mark.parametrize("run", ["arms_run", "noreweight_run"])
def test_every_private_artifact_is_owner_only(request, run):
    """The probe: arm models (``artifacts/arms/*/model``, release-format folders never shared, non-private
    arm included) were 0755/0644. Every path under the artifacts — arm models, skip markers, the folders
    between — is 0700 (folders) or 0600 (files)."""
    r = request.getfixturevalue(run)
    art = r.path(r.params.artifacts)
    if run == "arms_run":
        assert {p.parent.name for p in art.glob("arms/*/model")} >= {"nonprivate", "swag_ppm", "dpsgd"}
    paths = [art, *art.rglob("*")]
    assert len(paths) > 20
    bad = [
        f"{p.relative_to(art)} {stat.S_IMODE(p.stat().st_mode):04o}"
        for p in paths
        if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)
    ]
    assert bad == []


def test_nonprivate_is_not_private(arms_run):
    m = _flat(arms_run.path("metrics/nonprivate.json"))
    assert m["epsilon"] is None and m["guarantee"]["kind"] == "none"
    assert "not private" in m["delta"]
    assert m["epochs"] == arms_run.params.nonprivate.epochs
    assert math.isfinite(m["final_loss"])


def test_swag_ppm_arm_epsilon_includes_its_own_draw(arms_run):
    """ε = 2·max(Δ̂_2, M*) with M* the arm's own draw's max weighted loss, so ≥ the round-2 sensitivity ε."""
    from dprelease.mechanisms.swag_ppm.rounds import draw_from_round

    m = _flat(arms_run.path("metrics/swag_ppm.json"))
    sens = read_json(arms_run.path("metrics/sensitivity_r2.json"))
    _, _, _, m_star, g = draw_from_round(
        arms_run.params, Layout.from_params(arms_run.params, arms_run.root), 2, tag="swag_ppm"
    )  # the arm's own draw (its secret-key label)
    assert m["round"] == 2 and m["guarantee"] == g.as_dict()
    two_delta = 2 * max(sens["local_sensitivity"], m_star)  # ε = 2Δ̂ / min(1, T_min over all d directions)
    q = g.quantities
    assert m["epsilon"] == pytest.approx(
        two_delta / min(1.0, q["temperature_min"], q["temperature_min_all"]), rel=1e-12
    )
    assert q["temperature_min"] == pytest.approx(1.0, rel=1e-4)  # the subspace is calibrated; the floor is not
    assert m["epsilon"] >= sens["epsilon"] - 1e-12
    assert m["delta"] == "asymptotic, not quantified" and m["guarantee"]["kind"] == "ppm_local_asymptotic"


def test_dpsgd_runs_at_the_declared_target_by_default(arms_run):
    """The target is the declared dpsgd.target_epsilon (8.0), never the release's measured ε; δ ≤ n^-1.1."""
    p = arms_run.params
    m = _flat(arms_run.path("metrics/dpsgd.json"))
    release = read_json(arms_run.path("metrics/swag_ppm_draw.json"))["guarantee"]
    n = _n_train(arms_run.root)
    assert p.dpsgd.target_epsilon == 8.0 and p.released.delta is None
    assert m["target_epsilon"] == 8.0 and release["epsilon"] != 8.0
    assert 0.9 * m["target_epsilon"] <= m["epsilon"] <= m["target_epsilon"] + 1e-6
    assert m["noise_multiplier"] > 0
    assert m["delta"] == pytest.approx(_default_delta(n), rel=1e-12) and m["delta"] <= n**-1.1
    q = p.dpsgd.head.batch_size / n
    assert m["sample_rate"] == pytest.approx(q)
    assert m["steps"] == math.ceil(p.dpsgd.head.epochs / q)
    assert m["conversion"] == p.dpsgd.conversion


def test_dpsgd_sweep_rows(arms_run):
    p = arms_run.params
    sweep = read_json(arms_run.path("metrics/dpsgd_sweep.json"))
    assert sweep["target_epsilon"] == p.dpsgd.target_epsilon == 8.0
    assert [r["delta"] for r in sweep["rows"]] == p.dpsgd.delta_sweep
    for row in sweep["rows"]:
        assert row["target_epsilon"] == p.dpsgd.target_epsilon
        assert 0.9 * row["target_epsilon"] <= row["epsilon"] <= row["target_epsilon"] + 1e-6, row
        assert row["noise_multiplier"] > 0
    sigmas = [r["noise_multiplier"] for r in sweep["rows"]]
    assert sigmas == sorted(sigmas, reverse=True), "a larger δ must need less noise at the same ε"


def test_per_class_tables_for_each_arm(arms_run):
    data = arms_run.path(f"{arms_run.params.artifacts}/data")
    labels = read_json(data / "labels.json") | read_json(data / "sizes.json")  # public map | internal sizes
    for arm in ARM_DIRS:
        folder = arms_run.path(f"reports/arms/{arm}")
        per_class = pd.read_csv(folder / "per_class_f1.csv", dtype={"code": str})
        assert list(per_class.columns) == PER_CLASS_COLUMNS, arm
        assert sorted(per_class["code"]) == sorted(labels["codes"]), arm
        assert per_class["f1"].between(0, 1).all(), arm
        assert per_class["test_support"].sum() == sum(labels["test_sizes"]), arm
        m = _flat(arms_run.path(f"metrics/{arm}.json"))
        weighted = (per_class["f1"] * per_class["test_support"]).sum() / per_class["test_support"].sum()
        assert m["weighted_f1"] == pytest.approx(weighted, abs=1e-9), arm
        assert m["macro_f1"] == pytest.approx(per_class["f1"].mean(), abs=1e-9), arm
        quartiles = pd.read_csv(folder / "quartiles.csv")
        assert list(quartiles["group"]) == ["top quartile", "bottom quartile", "all classes"], arm


def test_dpsgd_with_explicit_target(arms_run, tmp_path, spy):
    params = parse_params(compare_raw(dpsgd__target_epsilon=3.0))
    root = copy_root(arms_run.root, tmp_path / "root")
    summary = baselines.dpsgd(params, root)
    assert read_json(root / "metrics/dpsgd.json") == summary
    m = _flat(root / "metrics/dpsgd.json")
    assert m["target_epsilon"] == 3.0
    assert 2.7 <= m["epsilon"] <= 3.0 + 1e-6
    assert m["noise_multiplier"] > 0
    assert m["delta"] == pytest.approx(_default_delta(_n_train(root)))
    default = _flat(arms_run.path("metrics/dpsgd.json"))
    assert default["target_epsilon"] != 3.0
    assert (m["noise_multiplier"] < default["noise_multiplier"]) == (3.0 > default["target_epsilon"])
    (run,) = spy
    assert run.kwargs["target_epsilon"] == 3.0 and run.kwargs["delta"] == m["delta"]
    assert run.kwargs["epochs"] == 2 and run.kwargs["batch_size"] == 8
    assert run.result.epsilon == m["epsilon"] and math.isfinite(run.result.final_loss)


def test_dpsgd_explicit_delta(arms_run, tmp_path):
    params = parse_params(compare_raw(dpsgd__target_epsilon=3.0, released__delta=1e-3))
    root = copy_root(arms_run.root, tmp_path / "root")
    baselines.dpsgd(params, root)
    m = _flat(root / "metrics/dpsgd.json")
    assert m["delta"] == 1e-3
    assert m["epsilon"] <= 3.0 + 1e-6


# ghost clipping against per-sample hooks ------------------------------------------------------------------------
def test_ghost_and_hooks_train_the_same_head(head_run, tmp_path, spy):
    """Fast gradient clipping is exact for Linear layers: with the same seed (same Poisson batches, dropout
    masks and noise) both Opacus modes end at the same parameters, up to float rounding."""
    root = copy_root(head_run.root, tmp_path / "root")
    for mode in ("ghost", "hooks"):
        baselines.dpsgd(parse_params(compare_raw(dpsgd__target_epsilon=2.0, dpsgd__head__grad_sample_mode=mode)), root)
    ghost, hooks = spy
    assert ghost.kwargs["grad_sample_mode"] == "ghost" and hooks.kwargs["grad_sample_mode"] == "hooks"
    assert ghost.result.noise_multiplier == hooks.result.noise_multiplier
    assert ghost.result.epsilon == hooks.result.epsilon
    assert (ghost.theta0 == hooks.theta0).all()
    moved = float((ghost.theta - ghost.theta0).abs().max())
    diff = float((ghost.theta - hooks.theta).abs().max())
    assert moved > 1e-3, "training barely moved the parameters: the comparison would say nothing"
    assert diff < 1e-5, f"ghost and hooks differ by {diff:.3g} (parameters moved {moved:.3g})"
    assert ghost.result.final_loss == pytest.approx(hooks.result.final_loss, abs=1e-5)


# DP-SGD on the full backend (tiny random transformer) ----------------------------------------------------------
@pytest.mark.parametrize("mode", ["ghost", "hooks"])
def test_dpsgd_full_tiny_trains(full_run, tmp_path, spy, mode):
    params = parse_params(compare_raw("full", dpsgd__full__grad_sample_mode=mode))
    root = copy_root(full_run.root, tmp_path / "root")
    baselines.dpsgd(params, root)
    m = _flat(root / "metrics/dpsgd.json")
    (run,) = spy
    assert run.kwargs["grad_sample_mode"] == mode
    assert math.isfinite(run.result.final_loss)
    assert float((run.theta - run.theta0).abs().max()) > 0, "no parameter changed"
    assert bool(torch.isfinite(run.theta).all())
    target = params.dpsgd.target_epsilon  # declared: not the release's ε
    assert m["target_epsilon"] == target == 8.0
    assert 0.9 * target <= m["epsilon"] <= target + 1e-6
    assert m["noise_multiplier"] > 0
    assert 0.0 <= m["weighted_f1"] <= 1.0
    n = _n_train(root)
    q = params.dpsgd.full.batch_size / n
    assert m["steps"] == math.ceil(params.dpsgd.full.epochs / q)
    # σ depends only on (ε, δ, q, steps), never on the clipping mode
    from dprelease.mechanisms.dpsgd.accounting import noise_multiplier

    assert m["noise_multiplier"] == noise_multiplier(target, _default_delta(n), q, m["steps"], params.dpsgd.conversion)


# bad settings: one-line errors before anything trains ----------------------------------------------------------
def _config_error(raw: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_params(raw)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("value", [0.0, -1.0])
def test_nonpositive_target_epsilon_rejected(value):
    assert "dpsgd.target_epsilon" in _config_error(compare_raw(dpsgd__target_epsilon=value))


@pytest.mark.parametrize("value", [0.0, 1.0, 1.5, -0.1])
def test_delta_outside_unit_interval_rejected(value):
    assert "released.delta" in _config_error(compare_raw(released__delta=value))


def test_the_former_dpsgd_delta_names_the_shared_delta():
    """δ is one declared value (``released.delta``): the release's, the dpsgd arm's and the frontier's."""
    assert "'dpsgd.delta' is now 'released.delta'" in _config_error(compare_raw(dpsgd__delta=1e-3))


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_delta_sweep_outside_unit_interval_rejected(value):
    assert "dpsgd.delta_sweep" in _config_error(compare_raw(dpsgd__delta_sweep=[1e-3, value]))


@pytest.mark.parametrize("stage", ["dpsgd", "dpsgd_sweep"])
def test_batch_larger_than_data_fails_before_training(head_run, tmp_path, no_training, stage):
    params = parse_params(compare_raw(dpsgd__head__batch_size=100_000, dpsgd__target_epsilon=2.0))
    root = copy_root(head_run.root, tmp_path / "root")
    with pytest.raises(ValueError, match="batch size") as info:
        run_stages(params, root, [stage])
    assert "\n" not in str(info.value)
    assert not (root / f"metrics/{stage}.json").exists()
    assert not (root / "reports/arms").exists()


def test_batch_check_with_default_target(head_run, tmp_path, no_training):
    """With the declared default target (no override) the batch check still comes first."""
    params = parse_params(compare_raw(dpsgd__head__batch_size=100_000))
    root = copy_root(head_run.root, tmp_path / "root")
    with pytest.raises(ValueError, match="batch size"):
        baselines.dpsgd(params, root)
    with pytest.raises(ValueError, match="batch size"):
        baselines.check_dpsgd(params, Layout.from_params(params, root))


def test_a_null_target_is_one_line_before_training(head_run, tmp_path, no_training):
    """No fallback to the release's ε: a null target is a one-line error, release or not, before any training
    (parse time when an arm needs it; read time otherwise)."""
    assert "dpsgd.target_epsilon" in _config_error(compare_raw(dpsgd__target_epsilon=None))
    params = parse_params(
        compare_raw(dpsgd__target_epsilon=None, compare__arms=["nonprivate"], privacy_audit__arms=["nonprivate"])
    )
    root = copy_root(head_run.root, tmp_path / "root")
    assert (root / "metrics/swag_ppm_draw.json").is_file()  # a release is there: it is not read
    for run in (baselines.dpsgd, baselines.dpsgd_sweep):
        with pytest.raises(ConfigError, match="dpsgd.target_epsilon") as info:
            run(params, root)
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="dpsgd.target_epsilon"):
        baselines.check_dpsgd(params, Layout.from_params(params, root))


def test_declared_levels_make_the_arms_independent_of_the_release():
    """DP-SGD's stages and the censored arm read no release record and no level but their own."""
    from dprelease.pipeline import registry

    params = parse_params(compare_raw())
    stages = {s.name: s for s in registry.stages(params)}
    for name in ("dpsgd", "dpsgd_sweep", "swag_ppm_censored"):
        assert "metrics/swag_ppm_draw.json" not in stages[name].deps, name
    assert "dpsgd.target_epsilon" not in stages["swag_ppm_censored"].params
    assert "ppm.censor_epsilon" in stages["swag_ppm_censored"].params


@pytest.mark.parametrize(
    "arms", [["nonprivate", "bogus"], [], ["dpsgd", "nonprivate", "dpsgd"]], ids=["unknown", "empty", "duplicate"]
)
def test_bad_arms_rejected(arms):
    assert "compare.arms" in _config_error(compare_raw(compare__arms=arms))


def test_reweighted_arm_needs_reweighting():
    from dprelease.compare.reports.stages import check as check_arms

    params = parse_params(compare_raw(ppm__reweight=False, compare__arms=["nonprivate", "swag_ppm_reweighted"]))
    with pytest.raises(ConfigError, match="compare.arms") as info:
        check_arms(params)
    assert "ppm.reweight" in str(info.value) and "\n" not in str(info.value)
    check_arms(parse_params(compare_raw(ppm__reweight=False, compare__arms=["nonprivate", "swag_ppm", "dpsgd"])))
    check_arms(parse_params(compare_raw()))


def test_arm_stage_names_match_the_stage_graph(arms_run):
    from dprelease.pipeline import registry

    names = [s.name for s in registry.group(arms_run.params, "compare")]
    assert sorted(names) == sorted([*ARM_STAGES, "compare_report"]) and names[-1] == "compare_report"


@pytest.mark.parametrize("mode", ["ghost", "hooks"])
def test_dpsgd_full_tiny_batches_narrower_than_the_padding(full_run, mode):
    """The full backend drops all-padding columns per batch; with the real max_length most batches are narrower
    than the split's padded width, so the model sees sliced (non-contiguous) token ids. Both modes must train."""
    from dprelease.core.backends.base import load_features
    from dprelease.core.data.splits import backend_for
    from dprelease.mechanisms.dpsgd.train import train_dpsgd

    params = full_run.params
    lay = Layout.from_params(params, full_run.root)
    feats, y = load_features(lay.features / "train.safetensors")
    feats = {k: torch.cat([v, torch.zeros(v.shape[0], 5, dtype=v.dtype)], dim=1) for k, v in feats.items()}
    backend = backend_for(params, lay)
    model = backend.new_model(feats)
    res = train_dpsgd(
        backend,
        model,
        feats,
        y,
        epochs=1,
        batch_size=8,
        lr=1e-3,
        max_grad_norm=1.0,
        target_epsilon=3.0,
        delta=1e-3,
        grad_sample_mode=mode,
        seed=1,
        noise_seed=2,
    )
    assert math.isfinite(res.final_loss) and res.epsilon <= 3.0 + 1e-6
