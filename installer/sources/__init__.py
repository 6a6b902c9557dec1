"""Release sources: the release model, GitHub, mirror folders and URLs, and OCI registries."""
