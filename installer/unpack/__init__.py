"""Release archives into a fresh staging directory: member rules and limits, readers, the one-pass stream."""
