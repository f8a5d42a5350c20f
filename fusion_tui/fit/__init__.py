"""fit package."""
