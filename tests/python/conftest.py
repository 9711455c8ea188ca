"""pytest setup for the olympus Python tests: the package from this checkout,
and the x64 switch restored after every test."""
import os
import sys

_PY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
if _PY not in sys.path:
    sys.path.insert(0, _PY)

import pytest  # noqa: E402

import olympus  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_x64():
    """Every test starts with x64 off (whatever OLYMPUS_ENABLE_X64 says) and
    ends with the switch restored to what it found."""
    before = olympus.config.olympus_enable_x64
    olympus.config.update("olympus_enable_x64", False)
    yield
    olympus.config.update("olympus_enable_x64", before)


@pytest.fixture(params=[False, True], ids=["x64off", "x64on"])
def x64(request):
    """Runs the test with x64 off and with x64 on; the value is the switch."""
    olympus.config.update("olympus_enable_x64", request.param)
    return request.param


@pytest.fixture(params=["eager", "jit"])
def mode(request):
    """Runs the test eagerly and under jit; the value wraps a function."""
    if request.param == "eager":
        return lambda f: f
    return lambda f: olympus.jit(f)
