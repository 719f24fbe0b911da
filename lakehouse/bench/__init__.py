"""The benchmarks behind `lakehouse bench`: each prints JSON, and each measured run is a fresh process."""
