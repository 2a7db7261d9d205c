"""nodescaler: a serverless, metrics-driven node autoscaler for EC2 Auto Scaling Groups and EKS."""
