"""Benchmarks (not tests): `python -m bench` runs them and prints tables."""
