"""`python -m steerable ...` (and `torchrun -m steerable train ...`): the `steerable` command."""

import sys

from steerable.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
