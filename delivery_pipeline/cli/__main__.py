import sys

from delivery_pipeline.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
