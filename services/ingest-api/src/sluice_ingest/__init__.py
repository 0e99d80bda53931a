"""ingest-api: owns every write; serves DocumentService and JobService."""
