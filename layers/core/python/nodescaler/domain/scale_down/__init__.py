"""Taking nodes away: which nodes nothing needs, which pods keep their node, draining one,
and the answer to the custom termination policy."""
