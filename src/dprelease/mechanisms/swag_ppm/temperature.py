"""The temperature of a SWAG sampler against a Laplace (GGN) approximation of the weighted pseudo posterior
(docs/guarantees.md, M, R.2): per-direction temperatures in SWAG's subspace, a certified floor over all parameters,
Mandt et al.'s learning rate. Arrays in, numbers out.

See docs/guarantees.md, T.7."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Callable

import numpy as np

CG_RTOL = 1e-6  # relative residual of each solve; the quadratic forms uᵢᵀ H⁻¹ uⱼ err by about its square
CG_MAX_ITER = 2000


@dataclass(frozen=True)
class Temperature:
    # per-direction temperatures: eigenvalues of Σ_U M⁻¹, M = U H⁻¹ Uᵀ (lower bounds: see ``estimate``)
    subspace: float  # T̂ = tr(Σ_U M⁻¹)/r, their mean
    subspace_min: float  # T_min, the smallest (what the conservative ε and ``calibration: scale`` use)
    subspace_max: float
    all_parameters: float  # T̂_all = tr(HΣ)/d
    subspace_conditional: float  # tr(Σ_U U H Uᵀ)/r: the old, biased reading (exact only for H-invariant U)
    rank: int
    prior_precision: float
    cg_iterations: int = 0
    cg_residual: float = 0.0  # largest relative residual ‖H xⱼ − uⱼ‖/‖uⱼ‖ of the solves
    bound_gap: float = 0.0  # T̂ with M's lower bound / T̂ − 1: 0 for exact solves
    # certified lower bound on the smallest temperature over ALL d directions (λ·scale·min var, module
    # docstring); None: not measured (then only the r subspace directions are certified)
    all_parameters_min: float | None = None
    parameters: int = 0  # d

    def as_dict(self) -> dict:
        return asdict(self)

    def rescaled(self, factor: float) -> "Temperature":
        """The same sampler with its scale multiplied by ``factor`` (every reading is linear in it)."""
        return replace(
            self,
            subspace=self.subspace * factor,
            subspace_min=self.subspace_min * factor,
            subspace_max=self.subspace_max * factor,
            all_parameters=self.all_parameters * factor,
            subspace_conditional=self.subspace_conditional * factor,
            all_parameters_min=None if self.all_parameters_min is None else self.all_parameters_min * factor,
        )


def subspace_basis(deviations: np.ndarray, rtol: float = 1e-6) -> np.ndarray:
    """Orthonormal rows spanning the SWAG deviations (right singular vectors above ``rtol``·σ_max)."""
    _, sv, vt = np.linalg.svd(np.asarray(deviations, dtype=np.float64), full_matrices=False)
    return vt[sv > rtol * sv.max()] if sv.size and sv.max() > 0 else vt[:0]


Operator = Callable[[np.ndarray], np.ndarray]


def conjugate_gradient(
    apply: Operator,
    rhs: np.ndarray,
    *,
    preconditioner: Operator | np.ndarray | None = None,
    rtol: float = CG_RTOL,
    max_iter: int = CG_MAX_ITER,
) -> tuple[np.ndarray, int, float]:
    """Solve A xⱼ = bⱼ for the rows of ``rhs`` [r, d] (A symmetric positive definite, ``apply`` maps
    [m, d] rows to A·rows) by preconditioned conjugate gradients, each row its own recurrence; a row
    stops once ‖bⱼ − A xⱼ‖ ≤ rtol·‖bⱼ‖ (only unfinished rows are multiplied). ``preconditioner``: an
    approximate A⁻¹ (symmetric positive definite), as an operator or its diagonal. Returns (x, iterations,
    largest relative residual of the recurrence), stopping after ``max_iter`` iterations even if a row has
    not converged; raises if A is not positive definite."""
    b = np.asarray(rhs, dtype=np.float64)
    if preconditioner is None or not callable(preconditioner):
        diag = np.ones(b.shape[1]) if preconditioner is None else np.asarray(preconditioner, dtype=np.float64)
        precond: Operator = lambda v: v * diag  # noqa: E731
    else:
        precond = preconditioner
    x, r = np.zeros_like(b), b.copy()
    z = np.asarray(precond(r), dtype=np.float64)
    p, rz = z.copy(), np.einsum("ij,ij->i", r, z)
    bnorm = np.linalg.norm(b, axis=1)
    bnorm[bnorm == 0] = 1.0
    res = np.linalg.norm(r, axis=1) / bnorm
    active = np.flatnonzero(res > rtol)
    it = 0
    while active.size:
        if it == max_iter:
            break
        it += 1
        q = np.asarray(apply(p[active]), dtype=np.float64)
        curv = np.einsum("ij,ij->i", p[active], q)
        if not np.all(curv > 0):
            raise ArithmeticError("conjugate gradients: the operator is not positive definite")
        alpha = rz[active] / curv
        x[active] += alpha[:, None] * p[active]
        r[active] -= alpha[:, None] * q
        res[active] = np.linalg.norm(r[active], axis=1) / bnorm[active]
        z = np.asarray(precond(r[active]), dtype=np.float64)
        rz_new = np.einsum("ij,ij->i", r[active], z)
        p[active] = z + (rz_new / rz[active])[:, None] * p[active]
        rz[active] = rz_new
        active = active[res[active] > rtol]
    return x, it, float(res.max()) if res.size else 0.0


def laplace_marginal(
    apply_ggn: Operator,
    basis: np.ndarray,
    ggn_diag: np.ndarray,
    *,
    prior_precision: float,
    preconditioner: Operator | None = None,
    rtol: float = CG_RTOL,
    max_iter: int = CG_MAX_ITER,
) -> Marginal:
    """Two-sided bounds on M = U H⁻¹ Uᵀ, H = G + λI, for the rows U of ``basis``, from approximate solves
    xⱼ ≈ H⁻¹uⱼ (conjugate gradients on GGN-vector products, preconditioned by ``preconditioner`` ≈ H⁻¹,
    default Jacobi 1/(diag G + λ); stopped at ``rtol`` or after ``max_iter`` iterations).

    For ANY X, with true residuals R = U − XH (one more product), eⱼ = H⁻¹uⱼ − xⱼ = H⁻¹rⱼ and
        M̂ = U Xᵀ + X Rᵀ  (entries uᵢᵀxⱼ + xᵢᵀrⱼ)  satisfies  M − M̂ = E, Eᵢⱼ = eᵢᵀ H eⱼ = rᵢᵀ H⁻¹ rⱼ,
    so 0 ⪯ M − M̂ ⪯ R Rᵀ/λ (H ⪰ λI): M̂ ⪯ M ⪯ M̂ + R Rᵀ/λ in the Loewner order, whatever the solver did."""
    if prior_precision <= 0:
        raise ValueError("prior precision must be > 0 (the Laplace reference needs a proper prior)")
    u = np.asarray(basis, dtype=np.float64)
    lam = float(prior_precision)
    h = lambda v: np.asarray(apply_ggn(v), dtype=np.float64) + lam * v  # noqa: E731
    pre = preconditioner if preconditioner is not None else 1.0 / (np.asarray(ggn_diag, dtype=np.float64) + lam)
    x, it, _ = conjugate_gradient(h, u, preconditioner=pre, rtol=rtol, max_iter=max_iter)
    resid = u - h(x)
    low = u @ x.T + x @ resid.T
    low = 0.5 * (low + low.T)
    rel = float((np.linalg.norm(resid, axis=1) / np.linalg.norm(u, axis=1)).max())
    return Marginal(lower=low, upper=low + resid @ resid.T / lam, iterations=it, residual=rel)


@dataclass(frozen=True)
class Marginal:
    """Bounds M̂ ⪯ U H⁻¹ Uᵀ ⪯ M̂ + RRᵀ/λ (:func:`laplace_marginal`)."""

    lower: np.ndarray
    upper: np.ndarray
    iterations: int
    residual: float  # largest relative true residual ‖rⱼ‖/‖uⱼ‖


def estimate(
    var: np.ndarray,
    deviations: np.ndarray,
    scale: float,
    basis: np.ndarray,
    ggn_diag: np.ndarray,
    ggn_block: np.ndarray,
    marginal: Marginal,
    *,
    prior_precision: float,
) -> Temperature:
    """Temperatures of the sampler scale·(diag(var) + DᵀD/(K−1)) against N(θ̄, (G + λI)⁻¹).

    ``basis`` [r, d] orthonormal rows spanning D's rows; ``ggn_diag`` = diag(G); ``ggn_block`` = U G Uᵀ;
    ``marginal``: bounds on U (G + λI)⁻¹ Uᵀ (:func:`laplace_marginal`). The per-direction temperatures fall
    as M grows (Loewner order), so those computed with the upper bound M̂ + RRᵀ/λ are lower bounds of the
    exact ones: T̂, T_min and T_max are reported from it, and ``bound_gap`` = T̂(M̂)/T̂ − 1 says how tight."""
    if prior_precision <= 0:
        raise ValueError("prior precision must be > 0")
    var, dev, u = (np.asarray(a, dtype=np.float64) for a in (var, deviations, basis))
    g_u = np.asarray(ggn_block, dtype=np.float64)
    d, k, r = var.size, dev.shape[0], u.shape[0]
    if (
        dev.shape[1:] != var.shape
        or u.shape[1:] != var.shape
        or g_u.shape != (r, r)
        or marginal.upper.shape != (r, r)
        or len(ggn_diag) != d
    ):
        raise ValueError("variance, deviations, basis, GGN diagonal, GGN block and marginal do not match")
    if r == 0:
        raise ValueError("the SWAG deviations span no subspace (all zero)")
    low = dev @ u.T  # [K, r]: deviations in subspace coordinates (they lie in its span)
    lr_scale = 1.0 / (k - 1) if k > 1 else 0.0
    sigma_u = scale * ((u * var) @ u.T + lr_scale * low.T @ low)
    temps = per_direction(sigma_u, marginal.upper)
    h_u = g_u + prior_precision * np.eye(r)
    h_diag = np.asarray(ggn_diag, dtype=np.float64) + prior_precision
    trace_all = float(h_diag @ var) + lr_scale * float(np.trace(low @ h_u @ low.T))
    return Temperature(
        subspace=float(temps.mean()),
        subspace_min=float(temps.min()),
        subspace_max=float(temps.max()),
        all_parameters_min=min(
            all_directions_floor(var, scale=scale, prior_precision=prior_precision), float(temps.min())
        ),
        parameters=int(d),
        all_parameters=scale * trace_all / d,
        subspace_conditional=float(np.trace(sigma_u @ h_u)) / r,
        rank=int(r),
        prior_precision=float(prior_precision),
        cg_iterations=int(marginal.iterations),
        cg_residual=marginal.residual,
        bound_gap=float(per_direction(sigma_u, marginal.lower).mean() / temps.mean() - 1),
    )


def all_directions_floor(var: np.ndarray, *, scale: float, prior_precision: float) -> float:
    """Certified lower bound λ·scale·min var on every per-direction temperature of the sampler
    scale·(diag(var) + DᵀD/(K−1)) against N(θ̄, (G + λI)⁻¹), over all d directions (module docstring)."""
    if scale <= 0 or prior_precision <= 0:
        raise ValueError("sampling scale and prior precision must be positive")
    return float(prior_precision * scale * np.min(np.asarray(var, dtype=np.float64)))


def subspace_deviations(
    var: np.ndarray, basis: np.ndarray, marginal_upper: np.ndarray, *, scale: float, rows: int
) -> np.ndarray:
    """Deviation rows D' [rows, d] in the span of ``basis`` U such that the sampler
    scale·(diag(var) + D'ᵀD'/(rows − 1)) has, in U, the covariance max(M⁺, scale·U diag(var) Uᵀ) in the
    Loewner sense — exactly M⁺ = ``marginal_upper`` when SWAG's diagonal part alone is narrower than M⁺ in
    every direction of U (the usual case): with A = M⁺/scale − U diag(var) Uᵀ = V diag(a) Vᵀ,
    D' = √(rows − 1)·diag(√max(a, 0)) Vᵀ U, so scale·(U diag(var) Uᵀ + A⁺) ⪰ M⁺ ⪰ U H⁻¹ Uᵀ: every
    per-direction temperature is ≥ 1."""
    u = np.asarray(basis, dtype=np.float64)
    r = u.shape[0]
    if not 1 <= r <= rows or rows < 2:
        raise ValueError(f"a {r}-dimensional subspace needs at least {max(r, 2)} deviation rows, got {rows}")
    if scale <= 0:
        raise ValueError("sampling scale must be positive")
    a = np.asarray(marginal_upper, dtype=np.float64) / scale - (u * np.asarray(var, dtype=np.float64)) @ u.T
    vals, vecs = np.linalg.eigh(0.5 * (a + a.T))
    low = np.sqrt(rows - 1) * (vecs * np.sqrt(np.clip(vals, 0.0, None))).T  # [r, r]: lowᵀlow = (rows − 1)·A⁺
    out = np.zeros((rows, u.shape[1]))
    out[:r] = low @ u
    return out


def per_direction(sigma_u: np.ndarray, marginal: np.ndarray) -> np.ndarray:
    """Eigenvalues of Σ_U M⁻¹ (ascending), via M = LLᵀ: those of the symmetric L⁻¹ Σ_U L⁻ᵀ."""
    chol = np.linalg.cholesky(np.asarray(marginal, dtype=np.float64))
    half = np.linalg.solve(chol, np.asarray(sigma_u, dtype=np.float64))
    return np.linalg.eigvalsh(np.linalg.solve(chol, half.T))


def implied_epsilon(epsilon: float, temperature: float) -> float:
    """2Δ̂/T for a sampler that is too narrow (T < 1); ε itself otherwise. Given T_min, the conservative ε."""
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    return epsilon / min(1.0, temperature)


def mandt_learning_rate(mean_sq_grad: float, sq_mean_grad: float, *, n: int, batch_size: int, dim: int) -> float:
    """η* = 2·S·D / (N·tr C), tr C = mean_i |∇ℓ_i|² − |mean_i ∇ℓ_i|² (module docstring)."""
    tr_c = mean_sq_grad - sq_mean_grad
    if not np.isfinite(tr_c) or tr_c <= 0:
        raise ValueError(f"gradient-noise trace must be positive and finite, got {tr_c}")
    return 2.0 * batch_size * dim / (n * tr_c)
