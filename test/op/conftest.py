"""Op-suite fixtures, and the dynamic-shape reuse check.

Every dynamic case runs twice: once at its `Size.dynamic`, then again (after the test's own
`dynamo.reset()`) at a second size of the same shape structure. The second run is compared with
eager like the first and must load no library the first did not: the generated C++ of a dynamic
graph may not depend on the sizes it was traced at.
"""

import inspect

import pytest

from dicp.bridge.cache.build import loaded_libraries

from ..common.conftest import backend, dynamic  # noqa: F401  (re-exported fixtures)
from ..common.utils import Size


def resized(size):
    """`size` with every dim above 1 grown by one. Dims of 1 stay, so broadcasting and dynamo's
    0/1 specialization see the same graph; the map is injective, so dims that were equal (and
    share one symbol) stay equal."""
    if isinstance(size, bool):
        return size
    if isinstance(size, int):
        return size + 1 if size > 1 else size
    if isinstance(size, (tuple, list)):
        return type(size)(resized(dim) for dim in size)
    return size


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    result = yield
    funcargs = pyfuncitem.funcargs
    compiled, sizes = funcargs.get("compiled_model"), funcargs.get("sizes")
    if compiled is None or not isinstance(sizes, Size) or not compiled.dynamic:
        return result
    second = sizes.resized if sizes.resized is not None else resized(sizes.dynamic)
    names = inspect.signature(pyfuncitem.obj).parameters
    rerun_args = {name: funcargs[name] for name in names}
    rerun_args["sizes"] = Size(sizes.static, second)
    before = loaded_libraries()
    pyfuncitem.obj(**rerun_args)
    new = loaded_libraries() - before
    assert not new, (
        f"dynamic graph loaded {len(new)} new C++ library(ies) at second size "
        f"{second} (first size {sizes.dynamic}): generated code depends on the "
        f"traced sizes"
    )
    return result
