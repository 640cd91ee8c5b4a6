"""looprescue: detect, cut and rescue repetition loops in LLM agent streams and sessions."""

__version__ = "0.1.0"
