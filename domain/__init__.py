"""sparkop's vocabulary, shared by the controllers and the tools: its kinds and the batch schedulers'
(:mod:`domain.kinds`), the label and annotation keys it and Spark use (:mod:`domain.labels`), and the
names it gives what it creates (:mod:`domain.naming`). ``core`` below it knows nothing of Spark.
"""

# Imported with the package, so that the client layer knows sparkop's kinds wherever its vocabulary is.
from sparkop.domain import kinds as kinds
