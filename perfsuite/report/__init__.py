"""Reports from stored records: console tables, markdown pages and plots."""
