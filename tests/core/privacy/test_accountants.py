"""The accountant registry (dprelease.core.privacy.accountants): one name → one accountant, its ε equal to the ε its Opacus
object reports while Opacus trains, the Mironov conversion against its closed form, one-line refusals, a new
accountant as one registration, and why the noise search is not Opacus's ``get_noise_multiplier``."""

from __future__ import annotations

import math

import pytest

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
