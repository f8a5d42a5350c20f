"""slots package."""
