"""Hand-written operators with their own backward passes."""
