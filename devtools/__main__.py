"""`python -m devtools`: the developer tools' command line (cli.py)."""

import sys

from devtools.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
