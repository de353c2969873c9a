"""Fixtures shared by the test modules."""
import pytest
from checks import x64_everywhere


@pytest.fixture
def x64():
    """x64 on in fnad and jax for the test, each restored afterwards."""
    with x64_everywhere():
        yield
