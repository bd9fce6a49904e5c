"""The floor of sparkop: client-side machinery that knows nothing of Spark or of sparkop's API.

Nothing here imports ``sparkop``, ``api``, ``apps_controller`` or ``driver_controller``.
"""
