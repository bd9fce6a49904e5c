"""The connect controller: each SparkConnect runs as one long-running SparkDriver at a time (the
Spark Connect server) behind a stable Service (docs/spark-connect.md)."""
