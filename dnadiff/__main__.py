import sys

from dnadiff.cli import main

sys.exit(main())
