"""The user's own package (a stand-in for a real project)."""
