"""``python -m fathom.cli``, as the ``fathom`` command."""

import sys

from fathom.cli import main

sys.exit(main())
