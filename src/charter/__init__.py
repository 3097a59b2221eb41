"""charter."""
