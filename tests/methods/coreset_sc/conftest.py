"""Fixtures for the coreset_sc tests."""

import pytest
import scipy.sparse as sp
from coreset_sc_helpers import random_graph


@pytest.fixture
def graph200() -> sp.csr_array:
    return random_graph(200, 0.04, seed=1)
