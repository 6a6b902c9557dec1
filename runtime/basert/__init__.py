"""The basert adapter."""
