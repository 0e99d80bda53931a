"""Generated from protos/sluice/v1; do not edit."""
