"""Controllers (docs to follow)."""
