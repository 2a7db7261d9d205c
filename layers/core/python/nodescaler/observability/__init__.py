"""What nodescaler reports and under which names: `reports` (the log lines and EMF records
every function writes, with Powertools), `records` (the EMF records themselves, built from
a result and printed) and `metric_names` (the namespace, dimensions and metric names,
which infra reads without loading Powertools)."""
