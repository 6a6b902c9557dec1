"""The network seam: the fetcher base and its implementations (requests, loopback, local files), the
messages it passes, URLs as it reads them; progress."""
