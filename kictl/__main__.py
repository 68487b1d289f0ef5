"""``python -m kictl``."""

from kictl.cli import main

main()
