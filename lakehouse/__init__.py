"""The application that runs the two paths: the `lakehouse` command line (`cli/`), the embedded
services a laptop or a test needs (`services/`: broker, object store, clusters, Prometheus, traffic),
the monitoring around the queries (`monitoring/`), and the benchmarks (`bench/`).

It sits above `operational` (the fast path) and `analytical` (the medallion), which sit above
`shared`; the import linter's contracts in pyproject.toml hold the layers.
"""
