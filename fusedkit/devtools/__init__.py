"""Tools for working on a lent GPU machine, not used by the notebooks.

- ``gpu_session.sh``: one call that runs GPU tests, ladder benchmarks and reports into ``$OUT``;
- ``fetch_gpu_wheels.sh``: the Jupyter wheels that machine lacks, downloaded here to carry;
- ``probe_*.py`` / ``sweep_*.py``: one-off explorations of kernel configurations, run as
  ``python -m fusedkit.devtools.<name>``; what they printed is kept under ``data/logs/``.
"""
