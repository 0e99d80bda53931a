"""Generated gRPC code of the Sluice contract."""
