"""Tools for working on a lent GPU machine, not used by the notebooks.

- ``gpu_session.sh``: one call that runs GPU tests, ladder benchmarks and reports into ``$OUT``;
- ``fetch_gpu_wheels.sh``: the Jupyter wheels that machine lacks, downloaded here to carry;
- ``*probe*.py`` / ``sweep_*.py``: explorations of kernel configurations, run as
  ``python -m devtools.<name>``; each checks and times through
  :func:`fusedkit.harness.measure` and records one run (``common.Probe``), a configuration
  or extra timing in the notes. The text logs under ``data/logs/`` are older probes' console
  output, kept as evidence; nothing reads them back.
"""
