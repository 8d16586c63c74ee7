"""The non-private baseline: ordinary fine-tuning, no privacy guarantee (spec D.5)."""
