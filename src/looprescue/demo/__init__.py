"""``looprescue demo``: a scripted model that loops, the real proxy in front of it, and a
client through the proxy beside one straight to the model. Runs offline on 127.0.0.1."""
