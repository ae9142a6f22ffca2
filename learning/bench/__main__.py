"""``python -m learning.bench``: learning.bench.main picks the bench for the kernels named."""

import sys

from learning.bench import main

sys.exit(main())
