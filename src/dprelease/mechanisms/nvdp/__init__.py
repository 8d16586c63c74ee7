"""NVDP with parameter clipping (issue 11; docs/algorithms.md, F): privatized text representations with a Rényi / Bayesian-DP
account.

Pure maths: ``nvib`` (NVIB layer, clipping, sampling, KL terms, denoising block), ``renyi`` (the eq. 3 bound,
printed and code-normalised, filtered / unfiltered statistics), ``accountant`` (the BDP accountant as the
reference code computes it), ``probe`` (the attacker's sector probe). Data and backends: ``tasks`` (GLUE, OSHA
split, NAICS sector), ``states`` (frozen-MiniLM token-state cache; fine-tuned encoder). ``train``, ``experiment``
(one task's grid), ``sanitizer`` (release folder, privatize), ``report``; ``stages`` declares the stages and
exposes ``sanitize``.
"""
