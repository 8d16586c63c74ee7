"""swag_ppm/fit: a round's record weights — none for the unweighted round 1, the stored array for a weighted
round (float32 on the way to torch). The fine-tune and SWAG stages themselves run in test_rounds.py; that
editing the PPM maths never re-runs them (their code is fit.py's closure) is in test_cache.py."""

from __future__ import annotations

import numpy as np
import torch

from dprelease.contracts.layout import Layout
from dprelease.core.config import parse_params
from dprelease.mechanisms.swag_ppm.fit import round_weights, round_weights_tensor


def test_round_one_is_unweighted_and_later_rounds_read_their_weights(tmp_path):
    lay = Layout.from_params(parse_params({}), tmp_path)
    assert round_weights(lay, 1) is None and round_weights_tensor(lay, 1) is None
    w = np.array([0.5, 1.0, 0.25])
    lay.weights(2).mkdir(parents=True)
    np.save(lay.weights(2) / "weights.npy", w)
    np.testing.assert_array_equal(round_weights(lay, 2), w)
    t = round_weights_tensor(lay, 2)
    assert t.dtype == torch.float32 and torch.equal(t, torch.tensor([0.5, 1.0, 0.25]))
