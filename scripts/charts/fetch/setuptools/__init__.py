"""A stand-in for setuptools while pip only downloads sdists (build_meta.py says why)."""
