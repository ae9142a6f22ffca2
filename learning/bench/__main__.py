"""``python -m learning.bench``: learning.bench.main picks the bench for the kernels named."""

import sys

from learning import cli
from learning.bench import main

sys.exit(cli.run(main, "bench"))
