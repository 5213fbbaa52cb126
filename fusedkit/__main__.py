"""``python -m fusedkit``: the command line (:mod:`fusedkit.cli`)."""

import sys

from fusedkit.cli import main

sys.exit(main())
