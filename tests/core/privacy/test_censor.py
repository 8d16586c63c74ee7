"""privacy.censor: both forms keep every contribution in [0, κ], agree between torch and numpy, and the soft
form keeps a gradient where the hard one has none."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.core.privacy.censor import Censor

LOSSES = np.array([0.0, 0.3, 2.0, 2.75, 4.68, 50.0])


@pytest.mark.parametrize("form", ["hard", "soft"])
def test_every_contribution_is_confined_to_zero_kappa(form):
    c = Censor(2.75, form)
    out = c.numpy(LOSSES)
    assert (out >= 0).all() and (out <= 2.75).all()
    assert np.allclose(c.torch(torch.tensor(LOSSES)).numpy(), out)
    assert np.all(np.diff(out) >= 0)  # order of the losses is kept


def test_hard_is_the_minimum_and_soft_is_smooth_below_it():
    hard, soft = Censor(2.75, "hard"), Censor(2.75, "soft")
    assert list(hard.numpy(LOSSES)) == [0.0, 0.3, 2.0, 2.75, 2.75, 2.75]
    assert np.all(soft.numpy(LOSSES) <= hard.numpy(LOSSES) + 1e-12)
    assert soft.numpy(np.array([1e-4]))[0] == pytest.approx(1e-4, rel=1e-6)  # ≈ identity near 0


def test_above_kappa_only_the_soft_form_has_a_gradient():
    for form, has_gradient in (("hard", False), ("soft", True)):
        x = torch.tensor([4.68], requires_grad=True)
        Censor(2.75, form).torch(x).sum().backward()
        assert (x.grad.item() > 0) is has_gradient, form


@pytest.mark.parametrize("bad", [dict(level=0.0), dict(level=-1.0), dict(level=1.0, form="clip")])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        Censor(**bad)
