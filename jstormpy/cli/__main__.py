"""Running this package as a module is the ``jstorm`` command (as it was before the CLI
became a package); the command itself lives in ``main.py``."""

import sys

from jstormpy.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
