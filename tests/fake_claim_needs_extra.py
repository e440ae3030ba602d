"""A claim module whose optional dependency is missing."""

import a_package_that_is_not_installed  # noqa: F401

CLAIM = None
