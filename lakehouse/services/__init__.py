"""Embedded services for a laptop, the demo and the tests: stand-ins for what production provides.

  - `broker`: a single-node Apache Kafka broker (KRaft) started from the Maven jars, in place of
    the cluster a deployment points `kafka.bootstrap_servers` at;
  - `generator`: synthetic, reproducible click traffic, in place of the retailer's producers.

Neither path imports them: the fast path and the medallion only see a Kafka address.
"""
