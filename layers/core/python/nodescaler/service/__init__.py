"""The application services: each trigger's work, told in numbered steps over the ports.

`dispatch` queues evaluations, `evaluation` decides and resizes one group, `drainer`
drains a node before its instance goes; `producers`, `kubernetes_metrics` and
`pending_pods` read a policy's metrics, `limiter` holds the cluster's limits, and
`policies` says which policy a group uses. Nothing here imports AWS, Kubernetes or
Powertools (a test checks).
"""
