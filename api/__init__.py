"""sparkop's API: the SparkApplication, SparkDriver, ScheduledSparkApplication and SparkConnect kinds
(sparkop.io/v1alpha1; the three user-facing ones also in kubeflow's sparkoperator.k8s.io, see api.crds).

See docs/api.md. Models in :mod:`sparkop.api.models`, CRD generation in :mod:`api.crds`, offline
validation in :mod:`api.validate`, cross-field rules in :mod:`api.rules`.
"""
