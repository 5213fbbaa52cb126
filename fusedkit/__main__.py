"""``python -m fusedkit``: the command line (:mod:`fusedkit.cli`). Importing the package has
already made Ctrl-C and SIGTERM during start-up one line and exit status 2
(:mod:`fusedkit.interrupts`)."""

import sys

from fusedkit.cli import main

sys.exit(main())
