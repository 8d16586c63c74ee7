"""The core guarantee kinds (privacy/kinds.py): what each says, worded with the record's own sampler."""

from __future__ import annotations

import ast
from pathlib import Path

from dprelease.core.privacy import guarantee, kinds
from dprelease.core.privacy.kinds import KINDS, article, sampler

SOURCE = Path(kinds.__file__)


def test_core_kinds_are_the_shared_ones_and_declare_what_the_card_needs():
    assert [k.name for k in KINDS] == [
        "ppm_local_asymptotic",
        "ppm_censored",
        "dp_accountant",
        "bayesian_dp",
        "none",
        "empirical_lower_bound",
        "empirical_probe",
    ]
    assert {k.name for k in KINDS if k.worst_case} == {"dp_accountant"}
    assert {k.name for k in KINDS if not k.claims_epsilon} == {"none", "empirical_probe"}
    for k in KINDS:
        assert k.meaning.strip() and "\n" not in k.meaning and guarantee.kind(k.name) is k


def test_pseudo_posterior_kinds_name_the_records_sampler_swag_by_default():
    ppm = guarantee.ppm(7.1, 3.55).as_dict()
    assert "only as good as the SWAG approximation of the posterior" in guarantee.kind(ppm["kind"]).sentence(ppm)
    mcmc = guarantee.ppm(7.1, 3.55, sampler="MCMC").as_dict()
    assert "only as good as the MCMC approximation of the posterior" in guarantee.kind(mcmc["kind"]).sentence(mcmc)
    cens = guarantee.censored(4.0, 1.9, weights=guarantee.UNIFORM_WEIGHTS, sampler="MCMC")
    assert "the draw comes from an MCMC approximation of that posterior" in guarantee.kind(cens.kind).sentence(
        cens.as_dict()
    )
    assert "the draw here comes from MCMC, so" in cens.meaning
    assert (
        "the draw here comes from SWAG, so" in guarantee.censored(4.0, 1.9, weights=guarantee.UNIFORM_WEIGHTS).meaning
    )
    assert sampler({}) == "SWAG" and sampler({"sampler": "NUTS"}) == "NUTS"
    assert [article(w) for w in ("SWAG", "MCMC", "HMC", "NUTS", "exact")] == ["a", "an", "an", "a", "an"]


def test_a_kinds_module_imports_the_declarations_only():
    """Read whenever a record's kind is looked up (verify, predict): never torch, never a plug-in."""
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert imported <= {"__future__", "dprelease.contracts.mechanism"}, imported
