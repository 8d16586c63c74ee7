"""Report rendering on a synthetic table (aggregates only)."""

from dprelease.mechanisms.nvdp.report import figure, headline, render, table, verdicts


def _rows():
    rows = [{"task": "mrpc", "variant": "nonprivate", "lambda": None, "score": 0.70}]
    for v, eps, rd in (("unconstrained", 10.7, 0.9), ("clipped", 10.6, 0.3)):
        for lam, s in ((0.01, 0.69), (0.1, 0.66)):
            rows.append(
                {
                    "task": "mrpc",
                    "variant": v,
                    "lambda": lam,
                    "score": s,
                    "bdp_epsilon": eps,
                    "rd_max": rd,
                    "rd_avg": rd / 10,
                    "rd_max_filtered": rd / 2,
                    "rd_avg_filtered": rd / 20,
                    "bdp_nan_terms_zeroed": 0,
                    "rd_nan_pairs": 3,
                    "rd_max_gaussian": rd * 0.25,
                    "rd_max_dirichlet": rd * 0.75,
                    "train_seconds": 1.0,
                }
            )
    return rows


def test_render_and_verdicts(tmp_path):
    df = table(_rows())
    assert list(df.columns[:7]) == ["task", "variant", "lambda", "score", "bdp_epsilon", "rd_max", "rd_avg"]
    assert set(headline(df)["lambda"]) == {0.01}
    assert "below unconstrained at 2/2 λ unfiltered, 2/2 filtered" in verdicts(df)[0]
    assert "-1.0 points" in verdicts(df)[0] and "Dirichlet part" not in verdicts(df)[0]
    assert "not above at 2/2 λ (largest excess -0.1000)" in verdicts(df)[0]
    worse = df.copy()
    worse.loc[worse.variant == "clipped", "rd_max"] = 2.0  # clipped max above: Dirichlet part 0.225 of 2.0
    assert "0/2 λ unfiltered" in verdicts(worse)[0] and "the Dirichlet part is 11–11 %" in verdicts(worse)[0]
    text = render(
        df,
        None,
        {"backend": "head", "renyi_order": 1.1, "delta": 1e-5, "eval_batch": 16, "seed": 1, "epochs": 3, "dim": 64},
    )
    assert "| mrpc (accuracy) | 0.700 |" in text and "| 0.300 = 0.075 + 0.225 |" in text
    figure(df, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
