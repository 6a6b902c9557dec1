"""The kernel: what every layer shares — errors, the home's layout, records, the JSON gate, digests, versions."""
