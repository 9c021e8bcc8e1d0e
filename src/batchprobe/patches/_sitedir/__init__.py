"""The directory batchprobe puts first on an engine's PYTHONPATH; see ``sitecustomize``.

It is a package only so that setuptools ships ``sitecustomize.py`` with batchprobe; nothing
imports it as ``batchprobe.patches._sitedir``.
"""
