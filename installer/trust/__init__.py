"""Client-side trust in a compat manifest service: the TUF client, answers checked and their refusals."""
