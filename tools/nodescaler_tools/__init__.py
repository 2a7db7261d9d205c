"""Local-only tooling: the operator CLI, demos and (later) the sandbox. Never shipped to Lambda."""
