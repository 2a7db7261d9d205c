"""A loopback Kubernetes API server and the pieces it is made of."""
