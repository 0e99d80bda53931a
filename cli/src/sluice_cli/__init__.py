"""The sluice command-line client (`sluice`) and the embedded runner (`sluice-dev`)."""

__version__ = "0.1.0"
