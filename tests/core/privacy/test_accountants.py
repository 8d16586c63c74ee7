"""The accountant registry (dprelease.core.privacy.accountants): one name → one accountant, its ε equal to the ε its Opacus
object reports while Opacus trains, the Mironov conversion against its closed form, one-line refusals, a new
accountant as one registration (in a copy of the package: one file, used by params, DP-SGD and its card), and why
the noise search is not Opacus's ``get_noise_multiplier``."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dprelease.contracts import code_scope
from dprelease.core.errors import ConfigError
from dprelease.core.privacy import accountants
from dprelease.core.privacy.accountants import Accountant
from dprelease.mechanisms.dpsgd.accounting import noise_multiplier, spent_epsilon


def test_the_project_accountants_are_registered_by_name():
    assert accountants.names() == ("mironov", "opacus", "prv")
    assert {accountants.get(n).label for n in accountants.names()} == {
        "RDP (Mironov conversion)",
        "RDP (Opacus conversion)",
        "PRV (Opacus)",
    }


@pytest.mark.parametrize("name", ["mironov", "opacus", "prv"])
def test_an_accountant_and_its_opacus_object_report_the_same_epsilon(name):
    sigma, q, steps, delta = 1.3, 0.05, 200, 1e-5
    acc = accountants.get(name)
    opacus = acc.opacus()
    for _ in range(steps):
        opacus.step(noise_multiplier=sigma, sample_rate=q)
    assert acc.epsilon(sigma, q, steps, delta) == pytest.approx(opacus.get_epsilon(delta), rel=1e-6)
    assert spent_epsilon(sigma, q, steps, delta, name) == pytest.approx(acc.epsilon(sigma, q, steps, delta), rel=1e-12)


def test_mironov_matches_its_closed_form_at_full_batch():
    # q = 1: the Gaussian mechanism composed T times, RDP(α) = α·T/(2σ²); σ = 10, T = 1, δ = 1e-5 → the order grid's
    # minimiser 49 of α/200 + log(1e5)/(α − 1) (the same derivation as tests/mechanisms/dpsgd/test_accounting.py)
    assert accountants.get("mironov").epsilon(10.0, 1.0, 1, 1e-5) == pytest.approx(
        49 / 200 + math.log(1e5) / 48, rel=1e-9
    )


def test_an_unknown_name_is_one_line():
    with pytest.raises(ConfigError, match=r"unknown accountant 'moments' \(one of mironov, opacus, prv\)"):
        accountants.get("moments")
    with pytest.raises(RuntimeError, match="registered twice"):
        accountants.register(accountants.get("prv"))


def test_a_new_accountant_is_one_registration():
    toy = Accountant(
        "toy",
        "twice the Mironov bound",
        lambda s, q, t, d: 2 * accountants.get("mironov").epsilon(s, q, t, d),
        lambda: None,
    )
    accountants.register(toy)
    try:
        eps = spent_epsilon(2.0, 0.1, 100, 1e-5, "toy")
        assert eps == pytest.approx(2 * spent_epsilon(2.0, 0.1, 100, 1e-5, "mironov"))
        assert spent_epsilon(noise_multiplier(4.0, 1e-5, 0.1, 100, "toy"), 0.1, 100, 1e-5, "toy") <= 4.0
    finally:
        accountants._REGISTRY.pop("toy")


def test_opacus_get_noise_multiplier_cannot_search_with_the_default_conversion():
    """Why ``dpsgd.accounting.noise_multiplier`` is the project's own bisection: Opacus's search builds its
    accountant from a name its registry knows (rdp, gdp, prv), and the project's default conversion is Mironov's."""
    from opacus.accountants.utils import get_noise_multiplier

    with pytest.raises(ValueError):
        get_noise_multiplier(target_epsilon=8.0, target_delta=1e-5, sample_rate=0.1, steps=100, accountant="mironov")
    ours = noise_multiplier(8.0, 1e-5, 0.1, 100, "opacus")  # where Opacus can search (its RDP), both agree closely
    theirs = get_noise_multiplier(
        target_epsilon=8.0, target_delta=1e-5, sample_rate=0.1, steps=100, accountant="rdp", epsilon_tolerance=0.001
    )
    assert ours == pytest.approx(theirs, rel=0.01)


def test_dpsgd_conversion_is_validated_against_the_registry():
    """Adding an accountant is one ``register`` call: ``dpsgd.conversion`` accepts exactly the registry's names."""
    from dprelease.core.config import parse_params

    for name in accountants.names():
        assert parse_params({"dpsgd": {"conversion": name}}).dpsgd.conversion == name
    with pytest.raises(ConfigError, match="unknown accountant 'gdp' \\(one of mironov, opacus, prv\\)"):
        parse_params({"dpsgd": {"conversion": "gdp"}})


# adding an accountant: one file ------------------------------------------------------------------------------------
TOY_ACCOUNTANT = """

# a toy accountant (test only): ε = q·T/σ, composed by adding
def _toy_spent(sigma: float, q: float, steps: int, delta: float) -> float:
    return q * steps / sigma


def _toy():
    from opacus.accountants import RDPAccountant

    class ToyAccountant(RDPAccountant):
        def get_epsilon(self, delta: float, alphas=None) -> float:
            return float(sum(q * n / s for s, q, n in self.history))

    return ToyAccountant()


register(Accountant("toy", "Toy (q·T/σ)", _toy_spent, _toy))
"""

TOY_CHECK = """
import json, sys
from pathlib import Path

import torch

from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import HeadParams, parse_params
from dprelease.core.errors import ConfigError
from dprelease.core.io import write_json
from dprelease.core.privacy import accountants, guarantee
from dprelease.mechanisms.dpsgd import accounting, card
from dprelease.mechanisms.dpsgd.train import train_dpsgd

p = parse_params({"dpsgd": {"conversion": "toy"}, "released": {"mechanism": "dpsgd"}})
try:
    parse_params({"dpsgd": {"conversion": "gdp"}})
    refusal = None
except ConfigError as e:
    refusal = str(e)
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
feats = {"x": torch.nn.functional.normalize(torch.randn(64, 16, generator=g), dim=1)}
y = torch.arange(64) % 3
backend = HeadBackend(n_classes=3, device=torch.device("cpu"), seed=1, params=HeadParams(hidden=0))
evaluation = ((4.0, 1.0, 1),)  # the release's DP evaluation, composed as dpsgd_release composes it
res = train_dpsgd(backend, backend.new_model(feats), feats, y, epochs=2, batch_size=16, lr=0.05, max_grad_norm=1.0,
                  target_epsilon=3.0, delta=1e-3, noise_seed=1, conversion=p.dpsgd.conversion, extra=evaluation)
total = accounting.spent_epsilon(res.noise_multiplier, res.sample_rate, res.steps, 1e-3, p.dpsgd.conversion, evaluation)
record = guarantee.accountant("DP-SGD (Opacus)", total, 1e-3, target_epsilon=3.0, conversion=p.dpsgd.conversion,
                              accountant=accountants.get(p.dpsgd.conversion).label, training_epsilon=res.epsilon,
                              noise_and_sampling="secret key").as_dict()
root = Path(sys.argv[1])
write_json(root / "metrics" / "data.json", {"classes": 3, "public": {"classes": 3, "until": "2015-12-31"}})
manifest = {
    "guarantee": record,
    "configuration": {"batch_size": 16, "epochs": 2, "optimizer": "adamw", "lr": 0.05, "max_grad_norm": 1.0,
                      "hidden": 0, "source": "fixed"},
    "training": {"noise_multiplier": res.noise_multiplier, "steps": res.steps, "sample_rate": res.sample_rate},
    "tuning": "none",
    "test_f1": {"weighted_f1": 0.5, "macro_f1": 0.4},
}
print(json.dumps({
    "names": list(accountants.names()), "conversions": list(accounting.CONVERSIONS), "refusal": refusal,
    "spent": accounting.spent_epsilon(2.0, 0.25, 8, 1e-3, "toy"),
    "sigma": accounting.noise_multiplier(2.0, 1e-3, 0.25, 8, "toy"),
    "trained": [res.epsilon, res.noise_multiplier, res.sample_rate, res.steps], "total": total,
    "card": card.card(p, root, manifest)[0],
}))
"""


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_a_new_accountant_is_one_file(tmp_path):
    """In a copy of the package, ONE file changes — the registry, one ``register`` call appended — and then
    ``dpsgd.conversion: toy`` is accepted, DP-SGD's noise search, trainer (its Opacus accountant) and the release's
    composition with the DP evaluation account with the toy (ε = q·T/σ), and its label reaches the guarantee record
    and the DP-SGD card."""
    src = tmp_path / "src"
    shutil.copytree(code_scope.PACKAGE_DIR, src / "dprelease", ignore=shutil.ignore_patterns("__pycache__"))
    registry = src / "dprelease" / "core" / "privacy" / "accountants.py"
    registry.write_text(registry.read_text(encoding="utf-8") + TOY_ACCOUNTANT, encoding="utf-8")
    before, after = _tree(code_scope.PACKAGE_DIR), _tree(src / "dprelease")
    assert [f for f in after if after[f] != before.get(f)] == ["core/privacy/accountants.py"]
    assert set(after) == set(before)
    proc = subprocess.run(
        [sys.executable, "-c", TOY_CHECK, str(tmp_path / "root")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["names"] == got["conversions"] == ["mironov", "opacus", "prv", "toy"]
    assert got["refusal"].endswith("unknown accountant 'gdp' (one of mironov, opacus, prv, toy)")
    assert "dpsgd.conversion" in got["refusal"] and "\n" not in got["refusal"]
    assert got["spent"] == pytest.approx(0.25 * 8 / 2.0)  # the toy's ε for a tiny case
    assert 1.0 <= got["sigma"] <= 1.0 + 1e-3  # the noise search: q·T/σ = 2 at σ = 1, rounded up
    eps, sigma, q, steps = got["trained"]
    assert (q, steps) == (0.25, 8)
    assert eps == pytest.approx(q * steps / sigma)  # the trainer's Opacus accountant is the toy's
    assert got["total"] == pytest.approx(q * steps / sigma + 1.0 / 4.0) and got["total"] <= 3.0  # + the evaluation
    text = got["card"]
    assert "differential privacy from Toy (q·T/σ) accountant." in text
    assert "the accountant (Toy (q·T/σ), conversion toy)" in text
    assert f"ε = {got['total']:.3f}" in text
