"""``python -m jstormpy.testing.chaos``: the seeded chaos soak (see :mod:`.soak`)."""

import sys

from jstormpy.testing.chaos.soak import main

sys.exit(main())
