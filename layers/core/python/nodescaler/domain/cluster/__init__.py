"""The cluster as the scheduler sees it: nodes and pods, quantities, the predicates a pod
must pass on a node, and how much of a group its pods have requested."""
