"""An OCI registry as a release source: references, credentials, the registry client and the source."""
