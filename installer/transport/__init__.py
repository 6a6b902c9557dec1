"""The network seam: the fetcher base and its implementations (requests, loopback, local files); progress."""
