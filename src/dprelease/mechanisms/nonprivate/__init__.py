"""The non-private baseline: ordinary fine-tuning, no privacy guarantee (docs/algorithms.md, D.5)."""
