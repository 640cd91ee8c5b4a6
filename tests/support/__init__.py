"""Shared end-to-end test infrastructure: a scripted model upstream and the real DSH runtime."""
