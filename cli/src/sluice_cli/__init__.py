"""The sluice command-line client and the embedded runner."""
