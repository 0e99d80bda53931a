"""Code shared by every Sluice service: settings, errors, logging, database, gRPC serving."""
