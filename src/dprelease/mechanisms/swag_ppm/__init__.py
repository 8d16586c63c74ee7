"""SWAG-PPM: the Bayesian pseudo posterior mechanism with a SWAG posterior (docs/algorithms.md, A–D).

Pure maths: ``swag`` (moments, sampling), ``ppm`` (risk, weights, ε = 2Δ̂, re-weighting),
``diagnostics`` (fit verdicts), ``tuning`` (the practical guide's decision rules). Loops and stage
functions: ``swag_train``, ``passes``, ``rounds``, ``released`` (writes the release), ``evaluate``, ``select``. Declarations: ``stages``.
"""
