"""One subpackage per paper; each is imported only when used."""

__all__: list[str] = []
