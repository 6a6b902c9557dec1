"""Serving: the OpenAI-compatible HTTP layer every serving worker shares."""
