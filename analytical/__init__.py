"""The medallion: Kafka -> bronze -> silver (+ quarantine) -> gold, the source of truth."""
