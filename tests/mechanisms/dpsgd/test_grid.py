"""The frontier's grid trainer (dpsgd/grid.py): a call with many different settings equals running each run alone
with ``train_batched`` and the same generators (to float rounding), whatever the other runs and the chunking,
and a run with fewer steps stops exactly at its T."""

import dataclasses

import pytest
import torch

from dprelease.mechanisms.dpsgd.batched import setting_for, train_batched
from dprelease.mechanisms.dpsgd.grid import train_grid

N, D, K = 48, 6, 3
EPS, DELTA = 4.0, 1e-3


def _data():
    gen = torch.Generator().manual_seed(7)
    x = torch.nn.functional.normalize(torch.randn(N, D, generator=gen), dim=1)
    return x, torch.randint(0, K, (N,), generator=gen)


def _settings():
    """Every axis varies: q (full batch and two sampled rates), T, σ (and a planted divisor), C, lr, optimizer,
    momentum (0 and 0.9); one run without noise."""
    base = dict(n=N, delta=DELTA, target_epsilon=EPS)
    out = [
        setting_for(epochs=2, batch_size=12, lr=0.05, max_grad_norm=1.0, **base),
        setting_for(epochs=3, batch_size=N, lr=2.0, max_grad_norm=0.1, optimizer="sgd", momentum=0.9, **base),
        setting_for(epochs=1, batch_size=24, lr=0.5, max_grad_norm=0.5, optimizer="sgd", **base),
        setting_for(epochs=4, batch_size=N, lr=0.01, max_grad_norm=1.0, target_epsilon=1.0, n=N, delta=DELTA),
        setting_for(
            epochs=2,
            batch_size=6,
            lr=1.0,
            max_grad_norm=1.0,
            optimizer="sgd",
            momentum=0.5,
            planted_noise_divisor=3.0,
            **base,
        ),
        setting_for(epochs=5, batch_size=24, lr=0.03, max_grad_norm=2.0, **base),
    ]
    out.append(dataclasses.replace(out[0], noise_multiplier=0.0))
    assert len({(s.sample_rate, s.steps) for s in out}) >= 5
    return out


def _generators(r: int):
    return [(torch.Generator().manual_seed(100 + r), torch.Generator().manual_seed(200 + r))]


@pytest.mark.parametrize("chunk", [1, 2, 64])
def test_each_run_equals_the_run_alone_with_the_same_generators(chunk):
    x, y = _data()
    settings = _settings()
    w, b = train_grid(
        x, y, settings, generators=[g for r in range(len(settings)) for g in _generators(r)], n_classes=K, chunk=chunk
    )
    assert w.shape == (len(settings), K, D) and b.shape == (len(settings), K)
    for r, s in enumerate(settings):
        ((sample, noise),) = _generators(r)
        w1, b1, _ = train_batched(
            torch.zeros(1, K, D), torch.zeros(1, K), x, y, s, sample_generator=sample, noise_generator=noise
        )
        assert torch.allclose(w[r], w1[0], atol=1e-4, rtol=1e-4), (r, (w[r] - w1[0]).abs().max())
        assert torch.allclose(b[r], b1[0], atol=1e-4, rtol=1e-4)
        assert w1.abs().max() > 1e-3  # it trained


def test_another_generator_or_setting_gives_another_run():
    """The comparison can fail: the same setting with another seed, or another lr with the same seed, differs."""
    x, y = _data()
    s = _settings()[0]
    gens = [
        (torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)),
        (torch.Generator().manual_seed(1), torch.Generator().manual_seed(3)),
        (torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)),
    ]
    w, _ = train_grid(x, y, [s, s, dataclasses.replace(s, lr=0.1)], generators=gens, n_classes=K)
    assert not torch.allclose(w[0], w[1], atol=1e-3) and not torch.allclose(w[0], w[2], atol=1e-3)


def test_a_run_with_fewer_steps_stops_at_its_T():
    """Noise-free AdamW steps all move the weights; a run of T steps next to a longer one equals the run of T
    steps alone, and differs from a run of T + 1 steps: nothing happens to it after step T."""
    x, y = _data()
    short = dataclasses.replace(_settings()[1], noise_multiplier=0.0, steps=3, optimizer="adamw", lr=0.05, momentum=0.0)
    longer = dataclasses.replace(short, steps=4)
    other = dataclasses.replace(short, steps=9, sample_rate=1.0)
    gens = lambda k: [(torch.Generator(), torch.Generator()) for _ in range(k)]  # noqa: E731  no draws: σ 0, q 1
    together, _ = train_grid(x, y, [other, short, longer], generators=gens(3), n_classes=K)
    alone, _ = train_grid(x, y, [short], generators=gens(1), n_classes=K)
    assert torch.allclose(together[1], alone[0], atol=1e-6)
    assert (together[1] - together[2]).abs().max() > 1e-3  # the fourth step would have moved it
    one_more, _ = train_grid(x, y, [longer], generators=gens(1), n_classes=K)
    assert torch.allclose(together[2], one_more[0], atol=1e-6)


def test_a_sampled_run_stops_drawing_at_its_T():
    """After its T steps a run draws nothing more from its generators: they are where T steps alone leave them."""
    x, y = _data()
    s = _settings()[0]
    gens = [
        (torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)),
        (torch.Generator().manual_seed(3), torch.Generator().manual_seed(4)),
    ]
    train_grid(x, y, [s, dataclasses.replace(s, steps=3 * s.steps)], generators=gens, n_classes=K)
    alone = (torch.Generator().manual_seed(1), torch.Generator().manual_seed(2))
    train_batched(torch.zeros(1, K, D), torch.zeros(1, K), x, y, s, sample_generator=alone[0], noise_generator=alone[1])
    assert torch.equal(gens[0][0].get_state(), alone[0].get_state())
    assert torch.equal(gens[0][1].get_state(), alone[1].get_state())


def test_bad_shapes_are_one_line_errors():
    x, y = _data()
    s = _settings()[0]
    with pytest.raises(ValueError, match="generator pair"):
        train_grid(x, y, [s, s], generators=[(torch.Generator(), torch.Generator())], n_classes=K)
    with pytest.raises(ValueError, match="shapes"):
        train_grid(
            x, y, [s], generators=[(torch.Generator(), torch.Generator())], n_classes=K, weight=torch.zeros(1, K, D + 1)
        )
