"""``python -m iclr25``."""

from iclr25.cli import main

main()
