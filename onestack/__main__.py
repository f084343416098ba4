import sys

from onestack.cli import main

sys.exit(main())
