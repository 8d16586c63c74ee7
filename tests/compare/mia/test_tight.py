"""The multi-run (tight) audit: its statistics against closed forms and under the null, and the fast
variant of ``make audit-tight``'s planted bugs (benchmarks/audit_tight.py's arms on synthetic embeddings,
the DP-SGD stage's real q, T and σ for n = 2,626, B = 512, 30 epochs, ε = 5.496, δ = 1/(2n)).

Power, stated: bug (a) (non-private labelled ε = 1) is convicted with 60 runs (ceiling 2.0); bug (b)
(DP-SGD with σ/4 claiming σ's ε = 5.49) needs ~10,000 runs to be convicted (ε_LB ≈ 5.6–5.9 there; 4,000
runs gave 5.20, not enough); the test runs 12,000 on a 9-dimensional head (a few seconds)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import install_test_key
from scipy.stats import norm

from dprelease.compare.mia import tight
from dprelease.contracts.layout import Layout
from dprelease.core.config import load_params

ROOT = Path(__file__).resolve().parents[3]
RELEASE_EPS, N_TRAIN = 5.495686637447633, 2626


def test_clopper_pearson_closed_forms():
    for n, a in ((30, 0.025), (1000, 0.0125)):
        assert tight.cp_upper(0, n, a) == pytest.approx(1 - a ** (1 / n), rel=1e-9)
        assert tight.cp_lower(n, n, a) == pytest.approx(a ** (1 / n), rel=1e-9)
    # the ceiling: every run right, ln(a^(1/n) / (1 − a^(1/n))) at a = α/2
    a = 0.025
    assert tight.ceiling(30, 30, alpha=0.05, delta=0.0) == pytest.approx(math.log(a ** (1 / 30) / (1 - a ** (1 / 30))))
    assert tight.ceiling(30, 30, alpha=0.05, delta=0.0) == pytest.approx(2.0338, abs=1e-3)  # 0.8843 / 0.1157


def test_threshold_bound_both_directions():
    member = np.array([True] * 100 + [False] * 100)
    scores = np.r_[np.arange(100) + 50.0, np.arange(100.0)]  # in: 50..149, out: 0..99
    hi = tight.threshold_bound(scores, member, 100.0, "high", alpha=0.05, delta=0.0)
    assert (hi["tp"], hi["fp"]) == (50, 0)  # in 100..149; no out ≥ 100
    assert hi["epsilon_lower_bound"] == pytest.approx(
        math.log(tight.cp_lower(50, 100, 0.025) / (1 - 0.025 ** (1 / 100)))
    )
    lo = tight.threshold_bound(scores, member, 50.0, "low", alpha=0.05, delta=0.0)
    assert (lo["tn"], lo["fn"]) == (50, 0)
    assert lo["epsilon_lower_bound"] == pytest.approx(hi["epsilon_lower_bound"])
    assert (
        tight.threshold_bound(scores, member, 100.0, "high", alpha=0.05, delta=0.2)["epsilon_lower_bound"]
        < hi["epsilon_lower_bound"]
    )  # δ lowers the bound
    with pytest.raises(ValueError, match="direction"):
        tight.threshold_bound(scores, member, 1.0, "up", alpha=0.05, delta=0.0)


def test_lr_scores_are_the_mixture_log_likelihood_ratio():
    q, sigma = 0.2, 1.7
    x = np.random.default_rng(0).normal(size=(3, 11)) * 2
    direct = np.log(((1 - q) * norm.pdf(x, 0, sigma) + q * norm.pdf(x, 1, sigma)) / norm.pdf(x, 0, sigma)).sum(1)
    assert np.allclose(tight.lr_scores(x, q, sigma), direct, rtol=1e-10)
    s_in, s_out = tight.simulate_lr_scores(np.random.default_rng(1), 4000, q, sigma, 50)
    assert s_in.mean() > s_out.mean()


def test_the_bound_holds_under_the_null():
    """Scores that carry no membership information: ε_LB > 0 in at most ~α of independent audits."""
    rng = np.random.default_rng(2)
    positive = 0
    for _ in range(200):
        member = rng.random(400) < 0.5
        design, test = rng.normal(size=400), rng.normal(size=400)
        t = tight.choose_test(design, rng.random(400) < 0.5, alpha=0.05, delta=0.0)
        positive += tight.audit(member, {"design": (test, *t)}, alpha=0.05)["epsilon_lower_bound"] > 0
    assert positive <= 200 * 0.05 + 3 * math.sqrt(200 * 0.05)


def test_choose_test_separates_separable_runs():
    member = np.array([True] * 10 + [False] * 10)
    scores = np.r_[np.linspace(1, 2, 10), np.zeros(10)]
    t, d = tight.choose_test(scores, member, alpha=0.05, delta=0.0)
    assert d == "high" and 0 < t < 1


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("audit_tight", ROOT / "benchmarks" / "audit_tight.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("tight")
    install_test_key(root)  # the suite's fixed key: the runs, designs and noise are the same every time
    params = load_params(ROOT / "params.yaml", {"artifacts": "artifacts", "dpsgd.target_epsilon": RELEASE_EPS})
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(16, 9, generator=g), dim=1)
    x[:, -1] = 0.0  # the canary column
    return mod, params, Layout.from_params(params, root), x, torch.arange(16) % 2


def test_planted_nonprivate_labelled_eps1_is_convicted(bench):
    mod, params, lay, x, y = bench
    r = mod.nonprivate_arm(params, lay, x, y, runs=60)
    b = r["bound"]
    assert b["fp"] == 0 and b["fn"] == 0  # the canary column moves only with the canary
    assert b["epsilon_lower_bound"] > r["claimed_epsilon"] == 1.0
    assert b["confidence"] == 0.95 and b["ceiling"] == pytest.approx(b["epsilon_lower_bound"])


POISSON = {
    "dpsgd.head.batch_size": 512,
    "dpsgd.head.epochs": 30,
    "dpsgd.head.lr": 0.01,
    "dpsgd.head.max_grad_norm": 1.0,
    "dpsgd.head.optimizer": "adamw",
    "dpsgd.head.momentum": 0.0,  # the golden numbers' setting (q = 512/n)
    "dpsgd.conversion": "mironov",
}  # and accountant (params.yaml's is now PRV)


def test_planted_dpsgd_noise_div4_is_convicted_and_honest_dpsgd_is_not(bench):
    mod, _, lay, x, y = bench
    params = load_params(
        ROOT / "params.yaml", {"artifacts": "artifacts", "dpsgd.target_epsilon": RELEASE_EPS, **POISSON}
    )
    bug = mod.dpsgd_arm(
        params,
        lay,
        x,
        y,
        N_TRAIN,
        label="test_div4",
        runs=12000,
        chunk=12000,
        design=20000,
        calibration=0.1,
        divisor=4.0,
    )
    assert (bug["sample_rate"], bug["steps"]) == (512 / N_TRAIN, 154)
    # the DP-SGD stage's accountant ε at the default δ = min(n^-1.1, 1/(2n)) (5.4934 at the former 1/(2n))
    assert bug["claimed_epsilon"] == pytest.approx(5.4955, abs=1e-3)
    assert bug["sigma_fitted"] == pytest.approx(bug["noise_multiplier"] / 4, rel=0.05)
    assert bug["bound"]["epsilon_lower_bound"] > bug["claimed_epsilon"]
    honest = mod.dpsgd_arm(
        params, lay, x, y, N_TRAIN, label="test_honest", runs=3000, chunk=3000, design=20000, calibration=0.1
    )
    assert 0 < honest["bound"]["epsilon_lower_bound"] <= honest["claimed_epsilon"]
    rows = mod.rows({"planted:dpsgd_noise_div4": bug, "dpsgd": honest})
    assert [r["method"] for r in rows] == ["multirun_cp", "gdp_fit_heuristic"] * 2
    assert rows[0]["convicted"] and not rows[2]["convicted"] and rows[2]["tightness"] > 0
    assert "not a bound" in rows[1]["bound"] and rows[1]["confidence"] is None


def test_the_default_full_batch_arm_is_audited_too(bench):
    """The DP-SGD arm as params.yaml declares it (full batch, q = 1, SGD with momentum): the planted σ/4 is
    convicted, the honest arm is not."""
    mod, params, lay, x, y = bench
    bug = mod.dpsgd_arm(
        params, lay, x, y, N_TRAIN, label="full_div4", runs=6000, chunk=6000, design=20000, calibration=0.1, divisor=4.0
    )
    assert (bug["sample_rate"], bug["steps"]) == (1.0, params.dpsgd.run_for(params.model.backend).epochs)
    assert bug["bound"]["epsilon_lower_bound"] > bug["claimed_epsilon"]
    honest = mod.dpsgd_arm(
        params, lay, x, y, N_TRAIN, label="full_honest", runs=3000, chunk=3000, design=20000, calibration=0.1
    )
    assert 0 < honest["bound"]["epsilon_lower_bound"] <= honest["claimed_epsilon"]


def test_benchmark_refuses_a_root_without_its_inputs_in_one_line(bench, tmp_path, capsys):
    mod = bench[0]
    assert mod.main(["--root", str(tmp_path)]) == 2
    assert "params file not found" in capsys.readouterr().err
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    assert mod.main(["--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no training embeddings" in err and err.strip().count("\n") == 0  # one line
    (tmp_path / "artifacts" / "features").mkdir(parents=True)
    (tmp_path / "artifacts" / "features" / "train.safetensors").write_bytes(b"")
    assert mod.main(["--root", str(tmp_path)]) == 2  # no randomness key
    assert "randomness key" in capsys.readouterr().err
