"""tui widgets package."""
