"""Utility evaluation shared by every mechanism: F1 (weighted, macro), per-class F1 with class sizes,
the class-size quartile table, and the per-arm tables the comparison reads."""
