"""superfluid.manifest: compat documents — build, merge, validate, sign, serve."""
