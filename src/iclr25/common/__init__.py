"""Code that three or more methods use."""

__all__: list[str] = []
