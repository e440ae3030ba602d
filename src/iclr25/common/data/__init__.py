"""Procedurally generated data worlds shared by several methods."""

__all__: list[str] = []
