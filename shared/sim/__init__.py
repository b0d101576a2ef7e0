"""Simulation with NumPy (the `sim` extra), for mock surveys and benchmarks; loaded only on use."""
