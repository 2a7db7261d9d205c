"""The pure core: policy documents, the proportional function, behavior and decisions.

Nothing here imports AWS, Kubernetes or Powertools, and nothing reads the clock
(tests/unit/test_domain_purity.py enforces both).
"""
