"""In-process rescue for SDK clients: ``looprescue.wrap(client)``."""

from .wrap import wrap

__all__ = ["wrap"]
