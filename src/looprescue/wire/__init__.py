"""How each protocol is spelled on the wire: its codecs and the SSE and JSON they share."""
