"""Simulations of topology change (scenario files, runner, metrics, reports).

Empty until the simulation issue lands; the package exists so the repository has its final shape.
"""
