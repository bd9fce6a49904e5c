"""sparkop, a level-triggered Kubernetes operator for Apache Spark.

The one installed package. Its layers live in folders of their own in the repository and are
imported through it: ``sparkop.core`` (the controller runtime), ``sparkop.domain`` (sparkop's kinds,
labels and names), ``sparkop.api`` (models, CRDs, validation), the controllers
(``sparkop.apps_controller``, ``sparkop.driver_controller``, ``sparkop.schedule_controller``,
``sparkop.connect_controller``), and here the entry points (``sparkop.cli``, ``sparkop.operator``, ...).
See docs/architecture.md.
"""
