"""Benchmarks of batch-quota-controller: `make bench` runs them all and writes results.json."""
