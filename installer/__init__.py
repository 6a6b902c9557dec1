"""superfluid.installer: release sources, resolver, download, verify, extract, store."""
