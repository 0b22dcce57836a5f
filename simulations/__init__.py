"""Simulations of topology change: scenario files, behaviours (shipped and one's own), the driver, metrics,
reports, sweeps, grids, replicates and studies (``docs/simulations.md``).

The Python API: :func:`simulations.run.simulate_file`, :func:`~simulations.run.sweep` and
:func:`~simulations.run.compare` take ``str | Path`` and return typed results; ``simulations.timeseries.load``
reads a run's ``timeseries.csv`` into a pandas DataFrame (the ``data`` extra).
"""
