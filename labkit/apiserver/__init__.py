"""Embedded Kubernetes API server (docs to follow)."""
