"""The tight audit's vectorised DP-SGD trainer against the project's DP-SGD path (Opacus, train_dpsgd):
same Poisson sampling, per-sample clipping, noise σC, expected-batch scaling and AdamW step — weight for
weight (to float rounding) with Opacus's batches replayed and the same noise seed — and the same
accountant ε for the same (q, σ, T)."""

import dataclasses

import pytest
import torch

from dprelease.core.backends.head import Head, HeadBackend
from dprelease.core.config import HeadParams
from dprelease.mechanisms.dpsgd.batched import Canary, setting_for, train_batched
from dprelease.mechanisms.dpsgd.train import train_dpsgd

N, D, K, B, EPOCHS, LR, C = 48, 6, 3, 12, 2, 0.05, 1.0
EPS, DELTA = 4.0, 1e-3


def _data():
    gen = torch.Generator().manual_seed(7)
    x = torch.nn.functional.normalize(torch.randn(N, D, generator=gen), dim=1)
    x[:, -1] = 0.0  # the canary column: zero in every real record
    return x, torch.randint(0, K, (N,), generator=gen)


def _opacus(model, x, y, divisor=1.0, noise_seed=1234, optimizer="adamw", momentum=0.0, lr=LR):
    """train_dpsgd, recording the Poisson batches its loader drew: [T, 1, N] masks."""
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    drawn, iterate = [], UniformWithReplacementSampler.__iter__

    def record(self):
        for idx in iterate(self):
            drawn.append(torch.zeros(1, N, dtype=torch.bool).index_fill_(1, torch.tensor(idx, dtype=torch.long), True))
            yield idx

    backend = HeadBackend(K, torch.device("cpu"), 0, HeadParams(hidden=0, dropout=0.0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(UniformWithReplacementSampler, "__iter__", record)
        res = train_dpsgd(
            backend,
            model,
            {"x": x},
            y,
            epochs=EPOCHS,
            batch_size=B,
            lr=lr,
            max_grad_norm=C,
            target_epsilon=EPS,
            delta=DELTA,
            grad_sample_mode="ghost",
            noise_seed=noise_seed,
            planted_noise_divisor=divisor,
            optimizer=optimizer,
            momentum=momentum,
        )
    return res, torch.stack(drawn[: res.steps])


@pytest.mark.parametrize(
    "divisor,optimizer,momentum,lr",
    [(1.0, "adamw", 0.0, LR), (4.0, "adamw", 0.0, LR), (1.0, "sgd", 0.9, 2.0), (1.0, "sgd", 0.0, 2.0)],
)
def test_one_run_equals_opacus_weight_for_weight(divisor, optimizer, momentum, lr):
    """AdamW and SGD (with and without momentum, torch.optim's rules) both match Opacus + torch.optim."""
    x, y = _data()
    model = Head(D, K, hidden=0, dropout=0.0, seed=3)
    w0, b0 = model.net[-1].weight.detach().clone(), model.net[-1].bias.detach().clone()
    res, batches = _opacus(model, x, y, divisor, optimizer=optimizer, momentum=momentum, lr=lr)
    s = setting_for(
        n=N,
        epochs=EPOCHS,
        batch_size=B,
        lr=lr,
        max_grad_norm=C,
        target_epsilon=EPS,
        delta=DELTA,
        planted_noise_divisor=divisor,
        optimizer=optimizer,
        momentum=momentum,
    )
    assert (s.sample_rate, s.steps, s.noise_multiplier) == (res.sample_rate, res.steps, res.noise_multiplier)
    assert s.epsilon(DELTA) == pytest.approx(res.epsilon, rel=1e-12)  # the claim: the accountant's ε for σ
    w, b, _ = train_batched(
        w0[None],
        b0[None],
        x,
        y,
        s,
        sample_generator=torch.Generator(),
        noise_generator=torch.Generator().manual_seed(1235),
        batches=batches,
    )
    assert torch.allclose(w[0], model.net[-1].weight.detach(), atol=2e-5)
    assert torch.allclose(b[0], model.net[-1].bias.detach(), atol=2e-5)
    assert not torch.allclose(w[0], w0, atol=1e-3)  # it trained


def test_a_different_noise_seed_or_noise_scale_is_seen():
    """The weight-for-weight comparison can fail: another secret seed or another σ gives other weights."""
    x, y = _data()
    model = Head(D, K, hidden=0, dropout=0.0, seed=3)
    w0, b0 = model.net[-1].weight.detach().clone(), model.net[-1].bias.detach().clone()
    _, batches = _opacus(model, x, y)
    s = setting_for(n=N, epochs=EPOCHS, batch_size=B, lr=LR, max_grad_norm=C, target_epsilon=EPS, delta=DELTA)
    for noise, setting in (
        (99, s),
        (
            1235,
            setting_for(
                n=N,
                epochs=EPOCHS,
                batch_size=B,
                lr=LR,
                max_grad_norm=C,
                target_epsilon=EPS,
                delta=DELTA,
                planted_noise_divisor=4.0,
            ),
        ),
    ):
        w, _, _ = train_batched(
            w0[None],
            b0[None],
            x,
            y,
            setting,
            sample_generator=torch.Generator(),
            noise_generator=torch.Generator().manual_seed(noise),
            batches=batches,
        )
        assert not torch.allclose(w[0], model.net[-1].weight.detach(), atol=1e-3)


def test_runs_are_independent_and_the_canary_column_only_moves_with_the_canary():
    x, y = _data()
    s = setting_for(n=N, epochs=EPOCHS, batch_size=B, lr=LR, max_grad_norm=C, target_epsilon=EPS, delta=DELTA)
    w0, b0 = torch.zeros(4, K, D), torch.zeros(4, K)
    included = torch.tensor([True, False, True, False])
    canary = Canary(row=1, col=D - 1, norm=10.0, included=included, generator=torch.Generator().manual_seed(5))
    nodp = dataclasses.replace(s, noise_multiplier=0.0)
    w, _, trace = train_batched(
        w0,
        b0,
        x,
        y,
        nodp,
        sample_generator=torch.Generator().manual_seed(1),
        noise_generator=torch.Generator().manual_seed(2),
        canary=canary,
    )
    # without noise: the canary column is zero for runs without the canary, and its clipped gradient is C
    assert torch.count_nonzero(w[~included][:, :, D - 1]) == 0
    assert torch.count_nonzero(w[included][:, 1, D - 1]) == 2
    seen = trace[included]
    assert torch.all((seen == 0) | ((seen - 1).abs() < 1e-5)) and seen.sum() > 0  # norm 10 clipped to C = 1
    assert torch.count_nonzero(trace[~included]) == 0
    # with noise, a run without the canary sees N(0, σ²) in units of C: 1000 runs × T steps
    out = Canary(
        row=1,
        col=D - 1,
        norm=10.0,
        included=torch.zeros(1000, dtype=torch.bool),
        generator=torch.Generator().manual_seed(5),
    )
    _, _, trace = train_batched(
        torch.zeros(1000, K, D),
        torch.zeros(1000, K),
        x,
        y,
        s,
        sample_generator=torch.Generator().manual_seed(1),
        noise_generator=torch.Generator().manual_seed(2),
        canary=out,
    )
    assert trace.std().item() == pytest.approx(s.noise_multiplier, rel=0.03)
    assert abs(trace.mean().item()) < 4 * s.noise_multiplier / trace.numel() ** 0.5


def test_poisson_batches_have_rate_q():
    x, y = _data()
    s = setting_for(n=N, epochs=EPOCHS, batch_size=B, lr=LR, max_grad_norm=C, target_epsilon=EPS, delta=DELTA)
    canary = Canary(
        row=0,
        col=D - 1,
        norm=1.0,
        included=torch.ones(2000, dtype=torch.bool),
        generator=torch.Generator().manual_seed(3),
    )
    nodp = dataclasses.replace(s, noise_multiplier=0.0)
    _, _, trace = train_batched(
        torch.zeros(2000, K, D),
        torch.zeros(2000, K),
        x,
        y,
        nodp,
        sample_generator=torch.Generator().manual_seed(1),
        noise_generator=torch.Generator(),
        canary=canary,
    )
    rate = (trace > 0.5).float().mean().item()  # the canary's coin: 2000 runs × T steps
    assert rate == pytest.approx(s.sample_rate, abs=4 * (s.sample_rate / (2000 * s.steps)) ** 0.5)


def test_full_batch_is_every_record_every_step():
    """batch size n: q = 1, T = epochs, every record in every batch."""
    s = setting_for(n=N, epochs=5, batch_size=N, lr=LR, max_grad_norm=C, target_epsilon=EPS, delta=DELTA)
    assert (s.sample_rate, s.steps) == (1.0, 5)
    canary = Canary(
        row=0, col=D - 1, norm=1.0, included=torch.ones(3, dtype=torch.bool), generator=torch.Generator().manual_seed(3)
    )
    x, y = _data()
    _, _, trace = train_batched(
        torch.zeros(3, K, D),
        torch.zeros(3, K),
        x,
        y,
        dataclasses.replace(s, noise_multiplier=0.0),
        sample_generator=torch.Generator(),
        noise_generator=torch.Generator(),
        canary=canary,
    )
    assert torch.all((trace - 1).abs() < 1e-5)


def test_bad_shapes_are_one_line_errors():
    x, y = _data()
    s = setting_for(n=N, epochs=EPOCHS, batch_size=B, lr=LR, max_grad_norm=C, target_epsilon=EPS, delta=DELTA)
    with pytest.raises(ValueError, match="shapes"):
        train_batched(
            torch.zeros(2, K, D + 1),
            torch.zeros(2, K),
            x,
            y,
            s,
            sample_generator=torch.Generator(),
            noise_generator=torch.Generator(),
        )
    with pytest.raises(ValueError, match="batch size"):
        setting_for(n=N, epochs=1, batch_size=N + 1, lr=LR, max_grad_norm=C, target_epsilon=EPS, delta=DELTA)
    with pytest.raises(ValueError, match="optimizer"):
        setting_for(
            n=N, epochs=1, batch_size=B, lr=LR, max_grad_norm=C, target_epsilon=EPS, delta=DELTA, optimizer="rmsprop"
        )
