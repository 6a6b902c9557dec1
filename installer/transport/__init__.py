"""The network seam: the fetcher base and its implementations (requests, local files), the messages it
passes, URLs as it reads them; progress."""
