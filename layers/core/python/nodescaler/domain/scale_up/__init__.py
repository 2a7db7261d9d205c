"""Adding nodes: which group grows (expanders, balance), the backoff after a failed
scale-up, and the fast path's rules for asking early."""
