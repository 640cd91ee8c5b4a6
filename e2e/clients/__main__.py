import sys

from e2e.clients.run import main

sys.exit(main())
