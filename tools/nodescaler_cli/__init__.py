"""The operator's command line, `nodescaler`: status, explain and validate against a
deployment; simulate and invoke run the sandbox (imported only by those commands)."""
