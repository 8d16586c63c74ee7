"""Report rendering on a synthetic table (aggregates only)."""


from dprelease.nvdp.report import figure, headline, render, table, verdicts


def _rows():
    rows = [{"task": "mrpc", "variant": "nonprivate", "lambda": None, "score": 0.70}]
    for v, eps, rd in (("unconstrained", 10.7, 0.9), ("clipped", 10.6, 0.3)):
        for lam, s in ((0.01, 0.69), (0.1, 0.66)):
            rows.append({"task": "mrpc", "variant": v, "lambda": lam, "score": s, "bdp_epsilon": eps, "rd_max": rd,
                         "rd_avg": rd / 10, "rd_max_filtered": rd / 2, "rd_avg_filtered": rd / 20,
                         "bdp_nan_terms_zeroed": 0, "train_seconds": 1.0})
    return rows


def test_render_and_verdicts(tmp_path):
    df = table(_rows())
    assert list(df.columns[:7]) == ["task", "variant", "lambda", "score", "bdp_epsilon", "rd_max", "rd_avg"]
    assert set(headline(df)["lambda"]) == {0.01}
    assert "below unconstrained at 2/2 λ" in verdicts(df)[0] and "-1.0 points" in verdicts(df)[0]
    text = render(df, None, {"backend": "head", "renyi_order": 1.1, "delta": 1e-5, "eval_batch": 16, "seed": 1,
                             "epochs": 3, "dim": 64})
    assert "| mrpc (accuracy) | 0.700 |" in text
    figure(df, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
