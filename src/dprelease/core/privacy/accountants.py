"""One name → one accountant (as Opacus's registry): ε after T Poisson-sampled Gaussian steps, and an Opacus accountant
that reports the same ε while training.

A new accountant is one :func:`register` call at the end of this file and nothing else: ``dpsgd.conversion``
accepts every registered name; records and cards take its label from here (tests/core/privacy/test_accountants.py).

See docs/privacy.md, "Notes from the code", `core/privacy/accountants.py`."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

from dprelease.core.errors import ConfigError


@dataclass(frozen=True)
class Accountant:
    name: str
    label: str  # how a record names it ("RDP (Mironov conversion)", "PRV (Opacus)")
    spent: Callable[[float, float, int, float], float]  # (σ, q, T, δ) -> ε
    make: Callable[[], object]  # a fresh Opacus accountant reporting the same ε

    def epsilon(self, sigma: float, sample_rate: float, steps: int, delta: float) -> float:
        """ε after ``steps`` Poisson-sampled Gaussian steps.

        Args:
            sigma: the noise multiplier σ.
            sample_rate: the Poisson sampling rate q.
            steps: the number of steps T.
            delta: the δ at which ε is reported.

        Returns:
            ε under this accountant."""
        return float(self.spent(float(sigma), float(sample_rate), int(steps), float(delta)))

    def composed(self, history: tuple[tuple[float, float, int], ...], delta: float) -> float:
        """ε of the composition of every (σ, q, T) entry of ``history``: the Opacus accountant's own composition.

        Args:
            history: (σ, q, T) entries, e.g. DP-SGD's steps and one Gaussian evaluation at q = 1, T = 1.
            delta: the δ at which ε is reported.

        Returns:
            ε of the whole history."""
        acc = self.make()
        acc.history = [(float(s), float(q), int(t)) for s, q, t in history]
        return float(acc.get_epsilon(float(delta)))

    def opacus(self):
        """A fresh Opacus accountant whose ``get_epsilon(delta)`` is this accountant's ε."""
        return self.make()


_REGISTRY: dict[str, Accountant] = {}


def register(accountant: Accountant) -> Accountant:
    """Add an accountant to the registry under its name (a name registered twice is an error).

    Args:
        accountant: the accountant.

    Returns:
        The same accountant, so that a module can write ``NAME = register(Accountant(...))``."""
    if accountant.name in _REGISTRY:
        raise RuntimeError(f"accountant {accountant.name!r} registered twice")
    _REGISTRY[accountant.name] = accountant
    return accountant


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get(name: str) -> Accountant:
    """The accountant registered under ``name``; a one-line :class:`ConfigError` naming the known ones.

    Args:
        name: a registered name (``dpsgd.conversion``'s choices).

    Returns:
        The accountant."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown accountant {name!r} (one of {', '.join(_REGISTRY)})") from None


# the project's three ---------------------------------------------------------------------------------------------
def _rdp(conversion: str) -> Callable[[float, float, int, float], float]:
    def spent(sigma: float, q: float, steps: int, delta: float) -> float:
        from dprelease.core.privacy.rdp import sampled_gaussian_epsilon

        with warnings.catch_warnings():  # "optimal order is the largest alpha": the bound holds at any order
            warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
            return sampled_gaussian_epsilon(sigma, q, steps, delta, conversion)

    return spent


def _converted_rdp(conversion: str):
    from opacus.accountants import RDPAccountant
    from opacus.accountants.analysis.rdp import compute_rdp

    from dprelease.core.privacy.rdp import ORDERS, rdp_to_epsilon

    class ConvertedRDPAccountant(RDPAccountant):
        """Opacus's RDP accountant, reporting ε with the chosen conversion."""

        def get_epsilon(self, delta: float, alphas=None) -> float:  # noqa: D401 - Opacus signature
            if conversion == "opacus":
                return super().get_epsilon(delta, alphas)
            if not self.history:
                return 0.0
            orders = alphas or ORDERS
            rdp = sum(compute_rdp(q=q, noise_multiplier=s, steps=n, orders=orders) for s, q, n in self.history)
            return rdp_to_epsilon(rdp, orders, delta, conversion)

    return ConvertedRDPAccountant()


def _prv_spent(sigma: float, q: float, steps: int, delta: float) -> float:
    acc = _prv()
    acc.history = [(sigma, q, steps)]
    return acc.get_epsilon(delta)


def _prv():
    from opacus.accountants import PRVAccountant

    class QuietPRV(PRVAccountant):
        """Opacus's PRV accountant, quiet at q = 1 (full batch: log(1 − q) is handled by Opacus)."""

        def get_epsilon(self, delta: float, **kwargs) -> float:  # noqa: D401 - Opacus signature
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return float(super().get_epsilon(delta, **kwargs))

    return QuietPRV()


register(Accountant("mironov", "RDP (Mironov conversion)", _rdp("mironov"), lambda: _converted_rdp("mironov")))
register(Accountant("opacus", "RDP (Opacus conversion)", _rdp("opacus"), lambda: _converted_rdp("opacus")))
register(Accountant("prv", "PRV (Opacus)", _prv_spent, _prv))
