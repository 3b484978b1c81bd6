import sys

from pybroker.cli import main

sys.exit(main())
