"""`python -m chaos [--short]` (`make chaos`): see chaos/driver.py."""

from .driver import main

main()
