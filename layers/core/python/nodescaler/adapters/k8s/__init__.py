"""Adapters that implement the ports with the Kubernetes API (imported only when needed)."""
