"""The content-addressed download cache: blobs, the holds of running processes, downloads into it, pruning."""
