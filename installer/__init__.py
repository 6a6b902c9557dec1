"""superfluid.installer: release sources, download, verify, extract, publish, in layers (docs/architecture.md)."""
