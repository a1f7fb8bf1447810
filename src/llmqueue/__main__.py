import sys

from llmqueue.cli import main

sys.exit(main())
