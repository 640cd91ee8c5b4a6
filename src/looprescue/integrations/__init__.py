"""looprescue inside other tools (each an optional extra: ``looprescue[litellm]``)."""
