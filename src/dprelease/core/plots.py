"""Diagnostic figures (PNG). Uses matplotlib's object API with the Agg canvas, so pyplot's global
state (backend, open figures) is never touched. Every file is written atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from dprelease.core.io import atomic_path


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | Path) -> None:
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=120)
    finally:
        fig.clear()


def max_delta_plot(
    series: dict[str, np.ndarray], epsilons: dict[str, float], path, tails: dict[str, dict] | None = None
) -> None:
    """One panel per round: M_s (largest weighted per-record loss of draw s) against s = 1..S.

    The dashed line is Delta = max_s M_s; the title gives 2*Delta and, for a round in ``epsilons`` (the released
    round, when its guarantee has an ε), that ε beside it; a round without one is never labelled ε. A round
    with an entry in ``tails`` (``extremes.tail_bound``) also shows its extreme-value quantile estimate
    (dotted) and confidence band.
    Persistent high variability suggests under-fitting; isolated spikes suggest over-fitting.
    """
    if not series:
        raise ValueError("max_delta_plot needs at least one round")
    n = len(series)
    fig = _new_figure(max(4.5, 4.2 * n), 3.6)
    axes = np.atleast_1d(fig.subplots(1, n, squeeze=False)[0])
    for ax, (name, values) in zip(axes, series.items()):
        m = np.asarray(values, dtype=float).ravel()
        if m.size == 0:
            raise ValueError(f"round {name!r} has no draws")
        x = np.arange(1, m.size + 1)
        delta = float(np.nanmax(m))
        eps = epsilons.get(name)
        eps_txt = (
            f"2Δ = {2 * delta:.4g}"
            if eps is None
            else f"ε = 2Δ = {eps:.4g}"
            if np.isclose(eps, 2.0 * delta)
            else f"ε = {eps:.4g} (2Δ = {2 * delta:.4g})"
        )
        ax.plot(x, m, marker="o", markersize=3 if m.size > 50 else 5, linewidth=0.8)
        ax.axhline(delta, linestyle="--", color="tab:red", linewidth=1, label=f"Δ = {delta:.4g}")
        tail = (tails or {}).get(name)
        if tail is not None:
            ax.axhspan(
                tail["ci_low"],
                tail["ci_high"],
                color="tab:orange",
                alpha=0.2,
                label=f"{tail['confidence']:.0%} CI [{tail['ci_low']:.4g}, {tail['ci_high']:.4g}]",
            )
            ax.axhline(
                tail["estimate"],
                linestyle=":",
                color="tab:orange",
                linewidth=1.2,
                label=f"GEV q{tail['level']:.4g} = {tail['estimate']:.4g}",
            )
        ax.set_title(f"{name}: Δ = {delta:.4g}, {eps_txt}", fontsize=10)
        ax.set_xlabel("draw s")
        ax.set_ylabel("$M_s$ (max weighted per-record loss)")
        if m.size == 1:
            ax.set_xlim(0.5, 1.5)
        ax.legend(loc="lower right", fontsize=8)
    _save(fig, path)


def f1_violin_plot(
    weighted: np.ndarray, macro: np.ndarray, released: tuple[float, float], path, title: str = ""
) -> None:
    """Violins of weighted and macro F1 over the utility draws; the released draw as red markers."""
    data = [np.asarray(v, dtype=float).ravel() for v in (weighted, macro)]
    data = [d[np.isfinite(d)] for d in data]
    fig = _new_figure(4.8, 4.0)
    ax = fig.subplots()
    positions = [1, 2]
    for pos, d in zip(positions, data):
        if d.size >= 2 and np.ptp(d) > 0:
            ax.violinplot([d], positions=[pos], showmeans=False, showmedians=True, showextrema=True)
        elif d.size:  # a KDE is undefined for a single (or constant) value: draw it as a tick
            ax.hlines(d[0], pos - 0.2, pos + 0.2, color="tab:blue", linewidth=2)
        if d.size:
            jitter = np.linspace(-0.05, 0.05, d.size) if d.size > 1 else np.zeros(1)
            ax.scatter(pos + jitter, d, s=6, color="tab:blue", alpha=0.4, zorder=2)
    ax.scatter(positions, list(released), marker="D", s=50, color="tab:red", zorder=3, label="released draw")
    ax.set_xticks(positions, ["weighted F1", "macro F1"])
    ax.set_xlim(0.4, 2.6)
    ax.set_ylabel("F1")
    ax.legend(loc="best", fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    _save(fig, path)


def per_class_plot(per_class: pd.DataFrame, path) -> None:
    """Per-class F1 against training class size (log x; symlog so size-0 classes still show)."""
    x = per_class["train_size"].to_numpy(dtype=float)
    y = per_class["f1"].to_numpy(dtype=float)
    fig = _new_figure(6.0, 4.0)
    ax = fig.subplots()
    if "test_support" in per_class:
        support = per_class["test_support"].to_numpy(dtype=float)
        sizes = 10 + 40 * np.sqrt(support / max(1.0, float(support.max(initial=0.0))))
    else:
        sizes = 20
    ax.scatter(x, y, s=sizes, alpha=0.7, edgecolors="none")
    if len(y):
        macro = float(np.mean(y))
        ax.axhline(macro, linestyle="--", color="grey", linewidth=1, label=f"macro F1 = {macro:.3f}")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xscale("symlog", linthresh=1)
    if len(x):
        ax.set_xlim(-0.5 if x.min() <= 0 else 0.7 * x.min(), 1.5 * max(1.0, x.max()))
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("training-set class size")
    ax.set_ylabel("per-class F1 (test)")
    _save(fig, path)


def per_class_compare_plot(frames: dict[str, pd.DataFrame], path) -> None:
    """One panel per arm: per-class F1 against training class size (seed 004 Figure 3 analogue)."""
    if not frames:
        raise ValueError("per_class_compare_plot needs at least one arm")
    n = len(frames)
    fig = _new_figure(3.6 * n, 3.6)
    axes = np.atleast_1d(fig.subplots(1, n, squeeze=False, sharey=True)[0])
    for ax, (name, frame) in zip(axes, frames.items()):
        x = frame["train_size"].to_numpy(dtype=float)
        y = frame["f1"].to_numpy(dtype=float)
        ax.scatter(x, y, s=14, alpha=0.7, edgecolors="none")
        ax.axhline(float(np.mean(y)) if len(y) else 0.0, linestyle="--", color="grey", linewidth=1)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_title(f"{name}\nmacro F1 {np.mean(y):.3f}" if len(y) else name, fontsize=9)
        ax.set_xlabel("training class size")
        ax.set_ylim(-0.05, 1.05)
    axes[0].set_ylabel("per-class F1 (test)")
    _save(fig, path)


def loss_curves_plot(histories: dict[str, list[float]], path) -> None:
    """Mean training loss per epoch for each phase and round (e.g. "round 2 fine-tune")."""
    if not histories:
        raise ValueError("loss_curves_plot needs at least one history")
    fig = _new_figure(6.0, 4.0)
    ax = fig.subplots()
    for name, losses in histories.items():
        ax.plot(np.arange(1, len(losses) + 1), losses, marker=".", label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean (weighted) training loss")
    ax.legend(fontsize=7)
    _save(fig, path)


def confusion_plot(matrix: np.ndarray, names: list[str], path, title: str = "") -> None:
    """Row-normalised confusion matrix (rows: true class, columns: predicted) for a few classes."""
    m = np.asarray(matrix, dtype=float)
    rows = m.sum(axis=1, keepdims=True)
    norm = np.divide(m, rows, out=np.zeros_like(m), where=rows > 0)
    k = len(names)
    fig = _new_figure(1.2 + 0.45 * k, 1.0 + 0.45 * k)
    ax = fig.subplots()
    im = ax.imshow(norm, vmin=0, vmax=1, cmap="Blues")
    ax.set_xticks(range(k), names, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(k), names, fontsize=7)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    if title:
        ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8, label="fraction of true class")
    _save(fig, path)


VERDICT_COLOURS = {"underfit": "#f4b183", "overfit": "#e06666", "ok": "#93c47d"}


def tune_grid_plot(
    cells: list[dict], path, chosen: tuple[float, int] | None = None, target: float | None = None
) -> None:
    """Seed 001 Figure 6 analogue: one cell per (c, FT epochs), coloured by fit verdict, labelled with
    ε and weighted / macro F1; the chosen configuration is outlined."""
    if not cells:
        raise ValueError("tune_grid_plot needs at least one cell")
    cs = sorted({c["c"] for c in cells}, reverse=True)
    es = sorted({c["epochs"] for c in cells})
    fig = _new_figure(1.6 + 1.7 * len(cs), 1.2 + 1.1 * len(es))
    ax = fig.subplots()
    for cell in cells:
        x, y = cs.index(cell["c"]), es.index(cell["epochs"])
        colour = VERDICT_COLOURS.get(cell["verdict"], "#cccccc")
        chosen_cell = chosen is not None and (cell["c"], cell["epochs"]) == tuple(chosen)
        ax.add_patch(
            Rectangle(
                (x - 0.48, y - 0.45),
                0.96,
                0.9,
                facecolor=colour,
                edgecolor="black" if chosen_cell else "white",
                linewidth=2.5 if chosen_cell else 0.5,
            )
        )
        ax.text(
            x,
            y,
            f"{cell['verdict']}\nε = {cell['epsilon']:.2f}\nF1 {cell['weighted_f1']:.3f} / {cell['macro_f1']:.3f}",
            ha="center",
            va="center",
            fontsize=7,
        )
    ax.set_xlim(-0.5, len(cs) - 0.5)
    ax.set_ylim(-0.5, len(es) - 0.5)
    ax.set_xticks(range(len(cs)), [f"c = {c:g}" for c in cs])
    ax.set_yticks(range(len(es)), [f"FT {e}" for e in es])
    title = "fit verdict, ε and weighted / macro F1 per run"
    if target is not None:
        title += f" (target ε < {target:g})"
    ax.set_title(title, fontsize=9)
    _save(fig, path)


def roc_plot(curves: dict[str, tuple[list[float], list[float]]], path, title: str = "") -> None:
    """Membership-inference ROC curves on log–log axes (low FPR is what matters), chance as a diagonal."""
    fig = _new_figure(6.4, 5.2)
    ax = fig.subplots()
    for label, (fpr, tpr) in curves.items():
        ax.plot(np.maximum(fpr, 1e-4), np.maximum(tpr, 1e-4), label=label, lw=1.4, ls="--" if "LiRA" in label else "-")
    grid = np.logspace(-4, 0, 50)
    ax.plot(grid, grid, color="grey", lw=0.8, ls=":", label="chance")
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(1e-4, 1),
        ylim=(1e-4, 1.05),
        xlabel="false positive rate",
        ylabel="true positive rate",
        title=title,
    )
    ax.legend(fontsize=7, loc="lower right")
    _save(fig, path)
