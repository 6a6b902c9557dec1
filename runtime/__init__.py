"""superfluid.runtime: adapters (basert, llamacpp, mlx) — recipes, ctypes loaders, workers."""
