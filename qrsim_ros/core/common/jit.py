"""Optional numba compilation of the core's hot kernels: the project's one ``njit`` decorator.

numpy's per-call overhead (about 1 us per operation) dominates models evaluated on arrays of a few
elements per vehicle, so the per-tick formulas (Pelican dynamics, Dryden recursion, GPS fix) are
written once, as explicit loops over vehicles in plain Python syntax, and compiled with numba when it
is available::

    @njit("float64(float64[:], float64)")
    def kernel(x, dt_s): ...

- With numba: ``numba.njit(signature, cache=True, fastmath=False, error_model="numpy", nogil=True)``.
  fastmath is off (no re-association: results equal the Python evaluation up to libm rounding) and
  the numpy error model gives IEEE results (inf/nan) for divisions by zero instead of exceptions.
  A kernel's declared signatures compile (or load from the on-disk cache, see below) all at once, on
  its first call or when a kernel that calls it is compiled, and then compilation is switched off:
  a call with other argument types fails loudly instead of compiling again. Loading on first use
  rather than at import keeps a process's start cheap (a node process that uses ten of the package's
  kernels loads ten, not all of them: about 1.3 s of CPU less per process); ``load_all()`` loads or
  compiles every kernel of the package at once (the set-up does, so that a fresh install's first
  simulation does not stop to compile).
- Without numba, or with the environment variable ``QRSIM_DISABLE_JIT=1`` (for debugging with pdb
  or coverage inside kernels), the decorator returns the Python function unchanged: same formulas,
  same results up to rounding, only much slower.

On-disk cache: numba's cache files go to the ``__pycache__`` directory next to the *real* source file,
so the colcon install's symlinked modules share the source tree's cache. numba checks only the
kernel's own file for changes, which would keep stale machine code after an edit of a kernel of
another module that it calls; so each kernel's cache is also stamped with the contents of the modules
in ``SHARED_KERNEL_MODULES`` (those whose kernels other modules call).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: Environment variable that turns compilation off (any value but "", "0", "false", "no").
DISABLE_ENV_VAR = "QRSIM_DISABLE_JIT"

#: Modules of this package whose kernels other modules' kernels call (turbulence uses pelican's
#: rotation helper, fleet_control the controllers' ones, energy the battery bank's step, airframes the
#: rotor fleet's and its controller's); a change to one of them invalidates every cached kernel of the
#: package.
SHARED_KERNEL_MODULES = ("common/jit.py", "vehicles/pelican.py", "vehicles/controllers.py",
                         "vehicles/battery.py", "vehicles/rotor.py", "vehicles/rotor_control.py")

_CORE_DIR = Path(__file__).resolve().parents[1]  # qrsim_ros/core


def _disabled_by_env() -> bool:
    return os.environ.get(DISABLE_ENV_VAR, "").strip().lower() not in ("", "0", "false", "no")


def _import_numba() -> Any:
    if _disabled_by_env():
        return None
    # numba imports coverage.py whenever it is installed (colcon's test verb installs it here), for its
    # opt-in coverage of compiled code (NUMBA_JIT_COVERAGE). Unless coverage is running already, numba
    # is imported as if coverage were absent: about 0.15 s of CPU less for every process (every node of
    # a launch). A later ``import coverage`` works as usual.
    hide_coverage = "coverage" not in sys.modules and not _numba_jit_coverage_requested()
    if hide_coverage:
        sys.modules["coverage"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        import numba
    except ImportError:  # the core still runs, slowly
        return None
    finally:
        if hide_coverage and sys.modules.get("coverage", 0) is None:
            del sys.modules["coverage"]
    return numba


def _numba_jit_coverage_requested() -> bool:
    return os.environ.get("NUMBA_JIT_COVERAGE", "").strip() not in ("", "0")


_numba = _import_numba()

#: True when kernels are compiled by numba.
JIT_ENABLED: bool = _numba is not None

#: Signature fragments for arrays a kernel only reads: float64, any layout, writeable or not (numba
#: accepts C/F-contiguous, strided and read-only arrays for them without copies or recompilation).
F8_1D_IN = "Array(float64, 1, 'A', readonly=True)"
F8_2D_IN = "Array(float64, 2, 'A', readonly=True)"
F8_3D_IN = "Array(float64, 3, 'A', readonly=True)"

#: Options of every compiled kernel (see module doc).
NJIT_OPTIONS: dict[str, Any] = {"cache": True, "fastmath": False, "error_model": "numpy", "nogil": True}


@functools.cache
def _kernel_package_stamp() -> tuple[str, ...]:
    """Content hashes of the shared kernel modules (missing ones hash as empty), once per process."""
    stamp = []
    for name in SHARED_KERNEL_MODULES:
        path = _CORE_DIR / name
        data = path.read_bytes() if path.exists() else b""
        stamp.append(hashlib.sha256(data).hexdigest())
    return tuple(stamp)


def _install_cache_locator(numba: Any) -> None:
    """Register a numba cache locator for this package (real-path ``__pycache__`` or ``NUMBA_CACHE_DIR``,
    package stamp).

    Uses numba's ``CacheImpl._locator_classes`` hook; if its internals differ (other numba version),
    or the source tree is read-only, numba's default locators stay in charge: caching still works,
    per import path and per file.
    """
    try:
        from numba.core.caching import CacheImpl, InTreeCacheLocator
    except ImportError:
        return

    class _CorePackageLocator(InTreeCacheLocator):  # type: ignore[misc, valid-type]
        def __init__(self, py_func: Any, py_file: str) -> None:
            real_file = os.path.realpath(py_file)
            super().__init__(py_func, real_file)
            if numba.config.CACHE_DIR:  # NUMBA_CACHE_DIR set by the user: honour it
                self._cache_path = os.path.join(numba.config.CACHE_DIR,
                                                self.get_suitable_cache_subpath(real_file))

        def get_source_stamp(self) -> Any:
            return (super().get_source_stamp(), _kernel_package_stamp())

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if _CORE_DIR not in Path(os.path.realpath(py_file)).parents:
                return None  # someone else's kernel: numba's own locators
            return super().from_function(py_func, py_file)

    classes = getattr(CacheImpl, "_locator_classes", None)
    if isinstance(classes, list) and not any(c.__name__ == "_CorePackageLocator" for c in classes):
        classes.insert(0, _CorePackageLocator)


def _runtime_only_loads(numba: Any) -> type | None:
    """numba's cache class with a lighter ``load_overload``, or None if its internals differ.

    numba's own first makes the CPU target complete (``refresh``: it imports numba's whole library of
    typing and lowering implementations, about 0.4 s of CPU), though rebuilding cached machine code needs
    only numba's runtime (NRT, whose symbols the code links to). A compilation still makes the target
    complete itself (numba's compiler refreshes both contexts first), so a kernel missing from the cache
    compiles as before. Every node process loads its kernels this way: about a quarter of its start.
    """
    try:
        from numba.core.caching import FunctionCache
        from numba.core.runtime import rtsys
    except ImportError:
        return None
    if not all(hasattr(FunctionCache, name) for name in
               ("load_overload", "_load_overload", "_guard_against_spurious_io_errors")):
        return None

    class RuntimeOnlyLoads(FunctionCache):  # type: ignore[misc, valid-type]
        def load_overload(self, sig: Any, target_context: Any) -> Any:
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
            return None  # (numba's: an I/O error the guard swallowed)

    return RuntimeOnlyLoads


if _numba is not None:
    _install_cache_locator(_numba)
_RUNTIME_ONLY_LOADS = _runtime_only_loads(_numba) if _numba is not None else None


def writable_twin(signature: str) -> str:
    """``signature`` with every array C-contiguous and writable (``F8_1D_IN``, ``float64[:]`` ->
    ``float64[::1]``, ...): an exact match for the arrays the tick loop makes (any other array takes the
    original signature; neither converts to the other, so a call is never ambiguous)."""
    twin = re.sub(r"Array\((\w+), (\d), 'A', readonly=True\)", r"Array(\1, \2, 'C')", signature)
    return twin.replace("[:, :]", "[:, ::1]").replace("[:]", "[::1]")


def njit(*signatures: str, writable_twins: bool = False) -> Callable[[F], F]:
    """Compile the decorated function with numba (eagerly, for the given signatures) if available.

    Use with at least one explicit signature, e.g. ``@njit("void(float64[:, :], float64)")``: the
    kernels compile (or load from the cache) at import, and calls with other argument types fail
    loudly instead of compiling again. Without numba the function is returned unchanged.

    ``writable_twins``: also compile each signature's ``writable_twin`` (same code, same results). numba
    matches arrays to read-only or non-contiguous parameters through its type conversions, about 0.2 us
    per such argument and call; a kernel called every tick saves that with an exact match.
    """
    if not signatures:
        raise TypeError("njit needs at least one explicit signature string")
    if writable_twins:
        signatures = tuple(dict.fromkeys(s for sig in signatures for s in (sig, writable_twin(sig))))

    def decorate(func: F) -> F:
        if _numba is None:
            return func
        dispatcher = _numba.njit(**NJIT_OPTIONS)(func)
        if _RUNTIME_ONLY_LOADS is not None and type(dispatcher._cache).__name__ == "FunctionCache":
            dispatcher._cache.__class__ = _RUNTIME_ONLY_LOADS
        _load_on_first_use(dispatcher, signatures)
        _DECLARED.append(dispatcher)
        return dispatcher  # type: ignore[no-any-return]

    return decorate


#: Every kernel decorated in this process (``load_all``).
_DECLARED: list[Any] = []


def _load_on_first_use(dispatcher: Any, signatures: tuple[str, ...]) -> None:
    """Make ``dispatcher`` (a numba dispatcher without overloads) compile exactly ``signatures``, then
    disable compilation, on whichever comes first: a call from Python (numba's ``_compile_for_args``) or
    the compilation of a kernel that calls it (numba types the call through ``compile``). Until then
    the two methods are instance attributes that load; loading removes them again."""
    from numba.core import sigutils
    from numba.core.compiler_lock import global_compiler_lock

    compile_signature = dispatcher.compile

    def load() -> None:
        # numba's own re-entrant lock: a caller's compilation holds it while typing this kernel
        with global_compiler_lock:
            if "compile" not in vars(dispatcher):
                return  # loaded already
            del dispatcher.compile, dispatcher._compile_for_args
            for sig in signatures:
                compile_signature(sig)
            dispatcher.disable_compile()

    def compile_declared(sig: Any) -> Any:
        load()
        args, _ = sigutils.normalize_signature(sig)
        existing = dispatcher.overloads.get(tuple(args))
        return existing.entry_point if existing is not None else None

    def call_declared(*args: Any, **kwargs: Any) -> Any:
        load()
        return dispatcher  # numba calls what this returns with the arguments: now an overload's dispatch

    dispatcher.compile = compile_declared
    dispatcher._compile_for_args = call_declared
    dispatcher.load_declared = load


def load_kernels_reachable_from(*roots: object, max_depth: int = 6,
                                stop: Callable[[], bool] | None = None) -> int:
    """Load the kernels of every module of this package that defines the class of an object reachable
    from ``roots`` (attributes, and items of lists, tuples and dicts, up to ``max_depth`` levels; not
    through frozen dataclasses, which are settings), and numba's own one-time set-up: what a process
    that built its models calls before its first simulated tick, so that the tick does not stop to
    load them. ``stop``: asked before each load; once it says True the rest is left to first use (a
    node asked to stop while it loads stops after one kernel's load, not after all of them: under load
    they took more than its 3 s stop deadline). Returns how many kernels it loaded."""
    if _numba is None:
        return 0
    package = __name__.split(".", 1)[0]
    modules: set[str] = set()
    seen: set[int] = set()
    level: list[object] = list(roots)
    roots_level = level  # the roots are walked whatever their class
    for _ in range(max_depth + 1):
        following: list[object] = []
        for obj in level:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, (list, tuple)):
                following.extend(obj[:64])
                continue
            if isinstance(obj, dict):
                following.extend(list(obj.values())[:64])
                continue
            module = type(obj).__module__
            params = getattr(type(obj), "__dataclass_params__", None)
            ours = module.startswith(f"{package}.") and not (params is not None and params.frozen)
            if not ours and level is not roots_level:
                continue  # not ours, or settings (a frozen dataclass: no model steps with it)
            if ours:
                modules.add(module)
            following.extend(getattr(obj, "__dict__", {}).values())
            following.extend(getattr(obj, name) for name in getattr(type(obj), "__slots__", ())
                             if hasattr(obj, name))
        level = following
    from numba.core.registry import cpu_target
    from numba.core.runtime import rtsys

    def stopped() -> bool:
        return stop is not None and stop()

    if stopped():
        return 0
    rtsys.initialize(cpu_target.target_context)  # the one-time set-up: numba's runtime
    loaded = 0
    for dispatcher in (d for d in _DECLARED if d.__module__ in modules):
        if stopped():
            break
        dispatcher.load_declared()
        loaded += 1
    return loaded


def load_all() -> int:
    """Load (from the cache) or compile every kernel of the package now; returns how many there are."""
    import importlib
    import pkgutil

    core = importlib.import_module(__name__.rsplit(".", 2)[0])  # qrsim_ros.core, by name: no layer cycle
    for module in pkgutil.walk_packages(core.__path__, f"{core.__name__}."):
        importlib.import_module(module.name)
    for dispatcher in _DECLARED:
        dispatcher.load_declared()
    return len(_DECLARED)



def overload_for(kernel: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
    """The compiled code of ``kernel`` that a call with ``args`` runs (the entry point of the declared
    overload numba's dispatcher would choose for their types), or ``kernel`` itself without numba or
    when no declared signature takes them (the dispatcher then raises its usual error).

    For a call a model makes every tick with the same arrays: it skips the dispatcher's typing of each
    argument (about 0.1 us per argument). Only for arguments of exactly the types of ``args``: the entry
    point unboxes what it is given as those types, unchecked."""
    if _numba is None or not hasattr(kernel, "overloads"):
        return kernel
    load = getattr(kernel, "load_declared", None)
    if load is not None:
        load()
    types = tuple(kernel.typeof_pyval(a) for a in args)
    cases = [overload.signature for overload in kernel.overloads.values()]
    try:  # safe conversions only (a C-contiguous array to 'A', a writable one to readonly), as a call
        chosen = kernel.typingctx.resolve_overload(kernel.py_func, cases, types, {}, allow_ambiguous=False,
                                                   unsafe_casting=False)
    except TypeError:  # ambiguous
        return kernel  # type: ignore[no-any-return]
    if chosen is None:
        return kernel  # type: ignore[no-any-return]
    return kernel.overloads[tuple(chosen.args)].entry_point  # type: ignore[no-any-return]


def foreign_function(function: Any, signature: str) -> Any:
    """A C function (a ``ctypes`` function with its argument types set) as an argument a kernel can call:
    with numba, a first-class function of ``signature`` (e.g. ``"void(uint64, uint64)"``; the kernel's
    signature names its type as ``FunctionType(void(uint64, uint64))``) at the function's address;
    without numba, the ``ctypes`` function itself. Passed as an argument rather than read as a global,
    the address (which differs per process) stays out of the machine code, so the kernel is cached."""
    if _numba is None:
        return function
    import ctypes

    from numba.core import sigutils, types
    from numba.experimental import function_type  # noqa: F401  (how numba types _Address: without
    # this, a process whose kernels came from the cache would see it as a Python object)

    address = ctypes.cast(function, ctypes.c_void_p).value
    args, restype = sigutils.normalize_signature(signature)

    class _Address(types.WrapperAddressProtocol):  # type: ignore[misc, name-defined]
        def __wrapper_address__(self) -> int:
            return int(address)

        def signature(self) -> Any:
            return restype(*args)

    return _Address()


@njit(f"boolean({F8_2D_IN})", writable_twins=True)
def all_finite(x):
    """Whether every value of the 2-D float array ``x`` is finite (``np.isfinite(x).all()`` without the
    cost of numpy's two calls on a few rows)."""
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            if not math.isfinite(x[i, j]):
                return False
    return True
