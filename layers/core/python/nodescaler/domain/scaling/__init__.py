"""The scaling rule of one node group: readings in, a decision and a plan out (the
proportional function, behavior, fallbacks, pauses, scale-in windows, limits, its state)."""
