"""worker: claims jobs and runs parse, chunk, embed, index through JobService."""
