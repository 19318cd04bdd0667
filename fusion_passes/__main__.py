"""``python -m fusion_passes ...``: the ``fusion-passes`` command where its script is not on PATH (a checkout used
through ``PYTHONPATH``)."""

import sys

from .cli import main

sys.exit(main())
