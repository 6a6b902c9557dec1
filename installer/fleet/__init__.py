"""Fleets: lock files, the plans made from them, mirror sync and push."""
