"""Capacity ahead of demand: forecasts and warm pools, scheduled capacity (and the words for
a refused cron), and buffers kept free for pods not yet created."""
