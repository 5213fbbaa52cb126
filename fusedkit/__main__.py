import sys

from fusedkit.cli import main

sys.exit(main())
