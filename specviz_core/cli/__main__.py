import sys

from specviz_core.cli.commands import main

sys.exit(main())
