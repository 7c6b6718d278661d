"""Kill/resume reliability benchmark: `python benchmarks/faults.py --trials 10` (see harness/bench/faults.py)."""

import sys

from harness.bench.faults import main

if __name__ == "__main__":
    sys.exit(main())
