"""Sources (docs/sources.md): where a collection's documents live, kept in step by leased sync
runs. The SourceService servicer (api.py) runs in ingest-api; the runs are carried out by the
`sluice-sources` process (main.py, runner.py)."""
