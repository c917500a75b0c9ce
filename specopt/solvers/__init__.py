"""Specialized numerical methods: numpy / scipy / highspy / numba only, no CVXPY imports.

Each solver takes plain arrays and returns a result object with the solution, the iteration
count, per-iteration history and its certificate (bound / gap / residuals).
"""
