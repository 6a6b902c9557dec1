"""The llamacpp adapter."""
