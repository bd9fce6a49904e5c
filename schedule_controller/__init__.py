"""ScheduledSparkApplication -> one SparkApplication per scheduled time (see decide.py)."""
