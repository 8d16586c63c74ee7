"""gpp.federated.local: the round/epoch schedule, batch walks, seeded streams and one client/aggregator step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.mechanisms.gpp.federated.local import (
    batch_rows,
    build_client,
    build_utility_head,
    client_step,
    encode,
    generator,
    head_steps,
    n_params,
    participants,
    seed_for,
    steps_per_client,
)


def test_steps_match_the_centralized_epochs():
    assert steps_per_client([640, 100, 65], epochs=3, batch_size=64) == [30, 6, 6]


@pytest.mark.parametrize("steps", [[30, 6, 6], [5], [7, 7], [13, 1, 9, 4]])
def test_every_client_takes_exactly_its_steps_spread_over_the_rounds(steps):
    rounds = max(steps)
    taken = np.zeros(len(steps), dtype=int)
    for r in range(1, rounds + 1):
        part = participants(steps, r)
        assert part, f"round {r} has no client"
        taken[part] += 1
    assert taken.tolist() == list(steps)
    assert participants(steps, 1)[0] == int(np.argmax(steps))  # the largest client is in every round


def test_one_epoch_of_batches_walks_a_permutation():
    n, b = 150, 64
    rows = np.concatenate([batch_rows(seed=3, client=1, step=j, n=n, batch_size=b) for j in range(3)])
    assert sorted(rows.tolist()) == list(range(n))  # last batch short (22 rows)
    nxt = np.concatenate([batch_rows(seed=3, client=1, step=j, n=n, batch_size=b) for j in range(3, 6)])
    assert sorted(nxt.tolist()) == list(range(n)) and not np.array_equal(rows, nxt)  # a fresh order per epoch


def test_seeds_are_deterministic_and_separate_streams():
    assert seed_for(0, 1, 2, "encode") == seed_for(0, 1, 2, "encode")
    assert len({seed_for(0, 1, 2, p) for p in ("encode", "adversary", "step")}) == 3
    assert seed_for(0, 1, 2, "encode") != seed_for(0, 2, 2, "encode") != seed_for(1, 1, 2, "encode")


def _client(seed=0, client=0):
    return build_client(
        d_in=12, d_z=4, n_s=2, encoder_hidden=(16, 8), head_hidden=(8,), lr=1e-2, seed=seed, client=client
    )


def test_clients_share_one_public_initial_encoder_and_own_their_adversary():
    a, b, c = _client(client=0), _client(client=0), _client(client=1)
    wa, wb, wc = (next(m.encoder.parameters()).detach() for m in (a, b, c))
    assert torch.equal(wa, wb) and torch.equal(wa, wc)
    assert not torch.equal(next(a.adversary.parameters()), next(c.adversary.parameters()))
    assert not torch.equal(wa, next(_client(seed=1).encoder.parameters()))
    before = torch.get_rng_state()
    _client(client=2)
    assert torch.equal(before, torch.get_rng_state())  # the global stream is left alone


def test_client_step_moves_encoder_and_adversary_not_the_received_head():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 12)).astype(np.float32)
    u, s = rng.integers(0, 3, 100), rng.integers(0, 2, 100)
    models = _client()
    psi, _ = build_utility_head(d_z=4, n_u=3, head_hidden=(8,), lr=1e-2, seed=0)
    psi_before = [p.detach().clone() for p in psi.parameters()]
    enc_before = [p.detach().clone() for p in models.encoder.parameters()]
    adv_before = [p.detach().clone() for p in models.adversary.parameters()]
    out = client_step(
        models, psi, x=x, u=u, s=s, rows=np.arange(32), beta=1.0, lam=0.01, k=2, batch_size=32, seed=0, client=0
    )
    assert set(out) == {"adversary_ce", "encoder_loss"} and all(np.isfinite(v) for v in out.values())
    assert models.step == 1
    assert all(torch.equal(a, b) for a, b in zip(psi_before, psi.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(enc_before, models.encoder.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(adv_before, models.adversary.parameters()))


def test_adversary_is_not_stepped_when_k_is_zero():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 12)).astype(np.float32)
    models = _client()
    psi, _ = build_utility_head(d_z=4, n_u=3, head_hidden=(8,), lr=1e-2, seed=0)
    adv_before = [p.detach().clone() for p in models.adversary.parameters()]
    out = client_step(
        models,
        psi,
        x=x,
        u=rng.integers(0, 3, 40),
        s=rng.integers(0, 2, 40),
        rows=np.arange(8),
        beta=1.0,
        lam=0.01,
        k=0,
        batch_size=8,
        seed=0,
        client=0,
    )
    assert np.isnan(out["adversary_ce"])
    assert all(torch.equal(a, b) for a, b in zip(adv_before, models.adversary.parameters()))


def test_head_steps_learn_the_pooled_pairs():
    rng = np.random.default_rng(0)
    u = rng.integers(0, 3, 300)
    z = (np.eye(3)[u] * 3 + rng.normal(scale=0.3, size=(300, 3))).astype(np.float32)
    psi, opt = build_utility_head(d_z=3, n_u=3, head_hidden=(16,), lr=1e-2, seed=0)
    gen = torch.Generator().manual_seed(0)
    first = head_steps(psi, opt, z, u, steps=1, batch_size=64, gen=gen)
    for _ in range(40):
        last = head_steps(psi, opt, z, u, steps=2, batch_size=64, gen=gen)
    assert last < 0.5 * first
    assert np.isnan(head_steps(psi, opt, z, u, steps=0, batch_size=64, gen=gen))


def test_encode_draws_one_stochastic_row_per_record():
    models = _client()
    x = np.random.default_rng(0).normal(size=(10, 12)).astype(np.float32)
    z1 = encode(models.encoder, x, generator(0, 0, 0, "encode"))
    z2 = encode(models.encoder, x, generator(0, 0, 1, "encode"))
    assert z1.shape == (10, 4) and z1.dtype == np.float32 and not np.allclose(z1, z2)
    assert np.array_equal(z1, encode(models.encoder, x, generator(0, 0, 0, "encode")))
    assert n_params(models.encoder) == 12 * 16 + 16 + 16 * 8 + 8 + 2 * (8 * 4 + 4)
