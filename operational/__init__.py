"""The fast path: Kafka -> parse -> dedupe -> 5-second window count -> threshold -> Kafka alerts."""
