"""NVDP with parameter clipping (privatized text representations; Rényi / Bayesian-DP account).
Reserved: not implemented yet (see the README's feature table)."""
