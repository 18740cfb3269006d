import sys

from quotactl.main import main

sys.exit(main())
