"""The floor of sparkop: the client layer (``kube``), informers and caches, the work queue, the
controller skeleton (one ``Plan``, one ``Applier`` and the expectations it keeps), the runtime
controllers register on, and the
names, labels, timestamps and log format every layer shares.

Nothing here imports ``sparkop``, ``api``, ``apps_controller``, ``driver_controller`` or
``devcluster`` (``tests/unit/test_layers.py``).
"""
