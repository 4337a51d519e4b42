"""The rows of the option registry (config/registry.py), one module per family of keys; spec.py:
what a row is."""
