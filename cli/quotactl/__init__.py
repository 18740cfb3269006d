"""quotactl: the operator CLI of batch-quota-controller."""
