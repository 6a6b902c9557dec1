"""The mlx adapter."""
