"""DP-SGD with Opacus (docs/algorithms.md, E): accounting (σ for a target (ε, δ)), training, and its stages."""
