"""Mechanism maths (no orchestration imports)."""
