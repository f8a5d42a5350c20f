"""tui screens package."""
