"""The local sandbox, never shipped to Lambda: moto's server and a loopback Kubernetes API
server with the functions wired to them on a virtual clock, a simulated cluster and
workloads, a Cluster Autoscaler baseline, and the scenarios `make demo` runs."""
