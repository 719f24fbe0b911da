"""What watches the running queries: the Prometheus exporter, the ops/stream_progress recorder, and
the live view of the running queries and their Kafka consumers."""
