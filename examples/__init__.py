"""Runnable examples; ``python -m examples.quickstart``."""
