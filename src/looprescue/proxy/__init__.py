"""The looprescue proxy: thin protocol adapters around the rescue engine."""
