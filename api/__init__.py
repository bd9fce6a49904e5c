"""sparkop's API: the SparkApplication and SparkDriver kinds (sparkop.io/v1alpha1).

See docs/api.md. Models in :mod:`sparkop.api.models`, CRD generation in :mod:`api.crds`, offline
validation in :mod:`api.validate`, cross-field rules in :mod:`api.rules`.
"""
