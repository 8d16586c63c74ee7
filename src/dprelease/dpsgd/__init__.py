"""DP-SGD with Opacus (spec E): accounting (σ for a target (ε, δ)), training, and its stages."""
