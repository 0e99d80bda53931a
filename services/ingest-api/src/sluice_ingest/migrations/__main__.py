"""`python -m sluice_ingest.migrations`: upgrade the database to the newest schema."""

from sluice_ingest.migrations import main

main()
