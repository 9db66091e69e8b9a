"""A stand-in for setuptools while pip only downloads sdists (see build_meta)."""
