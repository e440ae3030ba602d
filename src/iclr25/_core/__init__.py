"""Shared machinery: claims, registry, runner, reports, environment, seeding."""

__all__: list[str] = []
