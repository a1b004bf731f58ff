"""trnsparse 0.6 compatibility: the backend switches were importable from here."""
from ._backend import HAS_NKI, get_backend, set_backend

__all__ = ["HAS_NKI", "get_backend", "set_backend"]
