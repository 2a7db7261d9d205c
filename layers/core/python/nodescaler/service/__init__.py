"""The application services: each trigger's work, told in numbered steps over the ports.

`dispatch` queues evaluations, `evaluation` reads and plans one group and `actuation`
carries the plan out, `drainer` drains a node before its instance goes; `producers`,
`cluster_view` and `pending_pods` read a policy's metrics, `limiter` holds the cluster's
limits, and `policies` says which policy a group uses. Nothing here imports AWS, Kubernetes or
Powertools (a test checks).
"""
