"""What both paths share: the event contract, the rule, the alert contract, config, Spark, Kafka.

The operational (fast) path and the analytical (medallion) path import the same functions from
here, so the definition of a valid click, of a window's count and of a hot window exists once.
Importing this package is cheap: heavy dependencies (pyspark, kafka-python) are imported by the
modules that need them.
"""

from pathlib import Path

#: The checkout: conf/, .jars/ and the default .run/ are found from here.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
