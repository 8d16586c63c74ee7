"""SWAG moments, FIFO deviations and the sampler (docs/algorithms.md, A.1, A.2)."""

import numpy as np
import pytest
import torch

from dprelease.mechanisms.swag_ppm.swag import VAR_CLAMP, SwagCollector, SwagMoments, iter_samples, sample


def _collect(snapshots: np.ndarray, rank: int) -> SwagMoments:
    col = SwagCollector(snapshots.shape[1], rank=rank)
    for theta in snapshots:
        col.collect(torch.from_numpy(theta))
    return col.moments()


def _reference(snapshots: np.ndarray, rank: int):
    """float64 numpy reference: mean, ddof=0 variance, last `rank` rows of D_t = θ_t − mean(θ_1..θ_t)."""
    snaps = snapshots.astype(np.float64)
    devs = np.stack([snaps[t] - snaps[: t + 1].mean(axis=0) for t in range(len(snaps))])
    return snaps.mean(axis=0), snaps.var(axis=0), devs[-rank:]


def _make_moments(d: int, n_snap: int, rank: int, seed: int) -> SwagMoments:
    rng = np.random.default_rng(seed)
    # a random walk with drift: snapshots are correlated, like constant-lr SGD iterates
    snaps = 0.5 + np.cumsum(rng.normal(scale=0.3, size=(n_snap, d)), axis=0)
    return _collect(snaps, rank)


@pytest.mark.parametrize("rank", [20, 5])
def test_moments_match_numpy(rank):
    rng = np.random.default_rng(0)
    snaps = rng.normal(loc=rng.normal(size=50), scale=rng.uniform(0.1, 2.0, size=50), size=(20, 50))
    m = _collect(snaps, rank)
    mean, var, devs = _reference(snaps, rank)

    assert m.n_models == 20
    assert m.dim == 50
    assert m.rank == rank  # rank=5 < T=20: the FIFO dropped the 15 oldest rows
    assert m.mean.dtype == torch.float64 and m.var.dtype == torch.float64
    assert m.deviations.dtype == torch.float32
    np.testing.assert_allclose(m.mean.numpy(), mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(m.var.numpy(), var, rtol=1e-12, atol=0)
    # deviations are stored as float32: relative precision ~6e-8 of the entries' magnitude
    np.testing.assert_allclose(m.deviations.numpy(), devs, rtol=1e-6, atol=1e-6)
    # E[θ²] − E[θ]² form of docs/algorithms.md, A.1 agrees as well (in float64 it is harmless at this scale)
    np.testing.assert_allclose(m.var.numpy(), (snaps**2).mean(0) - snaps.mean(0) ** 2, rtol=1e-9)


def test_multidim_snapshots_are_flattened():
    rng = np.random.default_rng(1)
    snaps = rng.normal(size=(4, 3, 5))
    col = SwagCollector(15, rank=4)
    for s in snaps:
        col.collect(torch.from_numpy(s))
    np.testing.assert_allclose(col.moments().mean.numpy(), snaps.reshape(4, 15).mean(0), atol=1e-12)


def test_variance_stable_for_layernorm_like_parameters():
    # Parameters that barely move (LayerNorm gains ≈ 1 under lr 0.01): θ = 1 + 1e-4·z, stored in float32
    # exactly as a model would hold them. True variance ≈ 1e-8, i.e. below float32's resolution around 1
    # squared, so E[θ²]−E[θ]² in float32 is garbage; Welford in float64 must match numpy's two-pass.
    rng = np.random.default_rng(2)
    snaps32 = (1.0 + 1e-4 * rng.normal(size=(20, 200))).astype(np.float32)
    ref = snaps32.astype(np.float64).var(axis=0)  # two-pass, float64, on the exact stored values
    m = _collect(snaps32, rank=20)
    np.testing.assert_allclose(m.var.numpy(), ref, rtol=1e-6, atol=0)

    # the test is meaningful: the naive float32 one-pass formula is off by far more than 1e-6
    naive = (snaps32**2).mean(axis=0, dtype=np.float32) - snaps32.mean(axis=0, dtype=np.float32) ** 2
    assert np.max(np.abs(naive - ref) / ref) > 1e-2


def test_covariance_matches_numpy_construction():
    m = _make_moments(d=6, n_snap=10, rank=4, seed=3)
    D = m.deviations.double().numpy()
    assert D.shape == (4, 6)
    expected = 0.5 * (np.diag(m.var.numpy()) + D.T @ D / (4 - 1))
    np.testing.assert_allclose(m.covariance(0.5).numpy(), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m.covariance(1.0).numpy(), 2 * expected, rtol=1e-12, atol=1e-15)
    assert torch.equal(m.covariance(0.0), torch.zeros(6, 6, dtype=torch.float64))


def _check_gaussian_draws(x: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> None:
    """Empirical mean / covariance within 5 standard errors of the target, entry by entry.

    For n iid N(μ, Σ) draws: SE(mean_j) = sqrt(Σ_jj / n), and the sample covariance satisfies
    Var(S_jk) = (Σ_jk² + Σ_jj Σ_kk) / n (Isserlis; the 1/n correction for estimating μ is negligible).
    With 6 + 36 checked entries a 5-SE bound fails by chance with probability < 42 · 5.7e-7 ≈ 2.4e-5,
    and the fixed generator seed makes the outcome deterministic anyway. The float32 rounding of the
    draws (~1e-7 relative) is far below these bounds (SE ≈ 2e-3 · scale for n = 200,000).
    """
    n = x.shape[0]
    emp_mean = x.mean(axis=0)
    se_mean = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(emp_mean - mean) < 5 * se_mean), np.abs(emp_mean - mean) / se_mean

    emp_cov = np.cov(x, rowvar=False)
    sd = np.sqrt(np.diag(cov))
    se_cov = np.sqrt((cov**2 + np.outer(sd**2, sd**2)) / n)
    z = np.abs(emp_cov - cov) / se_cov
    assert z.max() < 5, z.max()


def test_sample_covariance_statistical():
    m = _make_moments(d=6, n_snap=10, rank=4, seed=4)
    gen = torch.Generator().manual_seed(123)
    x = sample(m, 200_000, gen)
    assert x.shape == (200_000, 6) and x.dtype == torch.float32
    _check_gaussian_draws(x.double().numpy(), m.mean.numpy(), m.covariance(0.5).numpy())

    # the low-rank part is large compared with the sampling error, so a sampler that ignored D̂
    # (diagonal only) or used the wrong divisor would fail the check above
    cov = m.covariance(0.5).numpy()
    off = cov - np.diag(np.diag(cov))
    se_max = np.sqrt(2 * np.diag(cov).max() ** 2 / 200_000)
    assert np.abs(off).max() > 50 * se_max


def test_fewer_snapshots_than_rank_divides_by_columns_minus_one():
    # Spec A.2 caveat: 3 snapshots, rank 20 -> 3 stored columns, low-rank term / (3 − 1), not / 19.
    rng = np.random.default_rng(5)
    snaps = rng.normal(size=(3, 5))
    m = _collect(snaps, rank=20)
    mean, var, devs = _reference(snaps, 20)
    assert m.rank == 3 and devs.shape == (3, 5)
    expected = 0.5 * (np.diag(var) + devs.T @ devs / 2)
    np.testing.assert_allclose(m.covariance().numpy(), expected, rtol=1e-6, atol=1e-7)

    gen = torch.Generator().manual_seed(7)
    x = sample(m, 200_000, gen).double().numpy()
    _check_gaussian_draws(x, mean, expected)


def test_single_snapshot_has_clamped_variance_and_no_low_rank_term():
    theta = torch.tensor([0.5, -2.0, 3.0])
    col = SwagCollector(3, rank=20)
    col.collect(theta)
    m = col.moments()
    assert m.rank == 1
    assert torch.all(m.var == VAR_CLAMP)
    np.testing.assert_allclose(m.covariance().numpy(), 0.5 * VAR_CLAMP * np.eye(3))
    x = sample(m, 10, torch.Generator().manual_seed(0))
    torch.testing.assert_close(x, theta.expand(10, 3), rtol=0, atol=1e-6)


def test_scale_zero_returns_the_mean():
    m = _make_moments(d=4, n_snap=6, rank=4, seed=6)
    x = sample(m, 5, torch.Generator().manual_seed(0), scale=0.0)
    torch.testing.assert_close(x, m.mean.float().expand(5, 4), rtol=0, atol=0)


def test_iter_samples_chunks_and_reproducibility():
    m = _make_moments(d=7, n_snap=8, rank=5, seed=8)

    def draw(seed):
        return list(iter_samples(m, 23, 5, torch.Generator().manual_seed(seed)))

    chunks = draw(11)
    assert [c.shape[0] for c in chunks] == [5, 5, 5, 5, 3]
    assert all(c.shape[1] == 7 and c.shape[0] <= 5 for c in chunks)
    a = torch.cat(chunks)
    assert a.shape == (23, 7)
    assert torch.equal(a, torch.cat(draw(11)))  # same seed -> identical draws
    b = torch.cat(draw(12))
    assert not torch.allclose(a, b)  # different seed -> different draws
    assert len({tuple(r.tolist()) for r in a}) == 23  # draws within a stream are distinct

    assert list(iter_samples(m, 0, 5, torch.Generator().manual_seed(0))) == []
    one = list(iter_samples(m, 4, 100, torch.Generator().manual_seed(0)))
    assert [c.shape[0] for c in one] == [4]

    # sample() itself is reproducible for the same generator seed
    s1 = sample(m, 3, torch.Generator().manual_seed(5))
    s2 = sample(m, 3, torch.Generator().manual_seed(5))
    assert torch.equal(s1, s2)


def test_moments_are_a_snapshot_not_a_view():
    col = SwagCollector(3, rank=2)
    col.collect(torch.tensor([1.0, 2.0, 3.0]))
    col.collect(torch.tensor([3.0, 2.0, 1.0]))
    m = col.moments()
    before = (m.mean.clone(), m.var.clone(), m.deviations.clone())
    col.collect(torch.tensor([10.0, 10.0, 10.0]))
    assert torch.equal(m.mean, before[0]) and torch.equal(m.var, before[1])
    assert torch.equal(m.deviations, before[2])
    assert col.moments().n_models == 3 and m.n_models == 2


def test_save_load_round_trip(tmp_path):
    m = _make_moments(d=9, n_snap=7, rank=4, seed=9)
    path = tmp_path / "sub" / "swag.safetensors"
    m.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["swag.safetensors"]  # no temp file left behind
    back = SwagMoments.load(path)
    assert back.n_models == 7
    for name in ("mean", "var", "deviations"):
        a, b = getattr(m, name), getattr(back, name)
        assert b.dtype == a.dtype
        assert torch.equal(a, b), name
    torch.testing.assert_close(back.covariance(), m.covariance(), rtol=0, atol=0)


def test_collector_errors():
    col = SwagCollector(4, rank=3)
    with pytest.raises(ValueError, match="no SWAG snapshots"):
        col.moments()
    with pytest.raises(ValueError, match="expected 4"):
        col.collect(torch.zeros(5))
    assert col.n_models == 0  # the rejected snapshot was not counted
    with pytest.raises(ValueError):
        SwagCollector(4, rank=0)


def test_moments_file_is_byte_stable_and_keeps_its_sampling_scale(tmp_path):
    """Identical moments must give identical files (stage keys hash them) and a calibrated scale survives."""
    from dataclasses import replace

    from dprelease.mechanisms.swag_ppm.swag import SwagMoments

    gen = torch.Generator().manual_seed(0)
    m = SwagMoments(
        mean=torch.randn(5, generator=gen, dtype=torch.float64),
        var=torch.rand(5, dtype=torch.float64),
        deviations=torch.randn(3, 5, generator=gen),
        n_models=4,
    )
    m = replace(m, scale=0.123)
    m.save(tmp_path / "a.safetensors")
    m.save(tmp_path / "b.safetensors")
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    back = SwagMoments.load(tmp_path / "a.safetensors")
    assert back.scale == 0.123 and back.n_models == 4
