"""CDK constructs and the stack that deploys nodescaler."""
