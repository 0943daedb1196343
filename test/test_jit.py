"""The compiled kernels (qrsim_ros.core.common.jit): same numbers as plain Python, buffered noise, collisions,
and the on-disk cache shared with colcon's symlinked install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qrsim_ros.core.common.frames import dcm_ned_to_body
from qrsim_ros.core.common.jit import DISABLE_ENV_VAR, JIT_ENABLED
from qrsim_ros.core.vehicles import pelican
from qrsim_ros.core.vehicles.pelican import (
    HOVER_THROTTLE,
    SI_TO_FIRMWARE,
    PelicanFleet,
    PelicanParams,
    default_state_limits,
    heun_step,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DYN_NOISE = np.array([0.3, 0.2, 0.1, 0.05, 0.04, 0.03])
needs_jit = pytest.mark.skipif(not JIT_ENABLED, reason="numba is not available or QRSIM_DISABLE_JIT is set")


def test_kernel_dcm_is_frames_dcm() -> None:
    rng = np.random.default_rng(0)
    angles = rng.uniform(-4.0, 4.0, (200, 3))
    expected = dcm_ned_to_body(angles[:, 0], angles[:, 1], angles[:, 2]).reshape(-1, 9)
    got = np.array([pelican.dcm_ned_to_body_entries(*a) for a in angles])
    # the same products of sines and cosines; only libm vs numpy rounding of sin/cos (1 ulp) may differ
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)


def _noisy_fleet(rngs: list[np.random.Generator], area: list[float]) -> PelicanFleet:
    params = PelicanParams(state_limits=default_state_limits(area), dyn_noise=DYN_NOISE)
    return PelicanFleet(len(rngs), params, rngs)


@pytest.mark.parametrize("shared", [False, True])
def test_buffered_dynamic_noise_equals_one_draw_per_step(shared: bool) -> None:
    """The fleet draws its noise in blocks; the values must be those of one 6-vector draw per valid
    vehicle and step (QRSim's order) across block boundaries, for a vehicle that is not set yet
    (invalid, empty buffer), becomes valid, leaves the area and is set again. The reference integrates
    each vehicle with the public heun_step and draws per step from twin generators."""
    n, steps = 3, 300  # 4 blocks of 64 steps and more
    if shared:  # one generator for all vehicles: QRSim's draw order is vehicle by vehicle, each step
        rngs = [np.random.default_rng(11)] * n
        ref_rngs = [np.random.default_rng(11)] * n
    else:
        rngs = [np.random.default_rng(s) for s in (11, 12, 13)]
        ref_rngs = [np.random.default_rng(s) for s in (11, 12, 13)]
    fleet = _noisy_fleet(rngs, [-40, 40, -40, 40, -60, 0])
    fleet.set_state([[0.0, 0, -20, 0, 0, 0], [10.0, 0, -20, 0, 0, 0]], vehicles=[0, 1])  # 2 is not set
    x_ref = fleet.state
    u = np.tile([0.0, 0.0, HOVER_THROTTLE, 0.0, 12.0], (n, 1))
    u[2, 1] = 0.9  # vehicle 2 rolls and drifts east until it leaves the area
    left_at = None
    for k in range(steps):
        if k in (100, 230):
            fleet.set_state([20.0, 36.0, -20.0, 0.0, 0.0, 0.0], vehicles=[2])
            x_ref[2] = fleet.state[2]
        live = fleet.valid
        for i in range(n):
            if live[i]:
                noise = DYN_NOISE * ref_rngs[i].standard_normal(6)
                x_ref[i] = heun_step(x_ref[i : i + 1], u[i : i + 1] * SI_TO_FIRMWARE, np.zeros((1, 3)),
                                     noise[None, :], fleet.params.mass_kg, fleet.params.dt_s)[0][0]
        fleet.step(u)
        np.testing.assert_array_equal(fleet.state, x_ref)
        if left_at is None and k > 100 and not fleet.valid[2]:
            left_at = k
    assert left_at is not None and left_at < 220, left_at  # vehicle 2 was invalid between its set_states
    assert fleet.valid[:2].all()


def _brute_force_near(pos: np.ndarray, d: float) -> np.ndarray:
    finite = np.all(np.isfinite(pos), axis=1)
    near = np.zeros(len(pos), bool)
    for i in range(len(pos)):
        for j in range(len(pos)):
            if i != j and finite[i] and finite[j] and np.sqrt(np.sum((pos[i] - pos[j]) ** 2)) < d:
                near[i] = True
    return near


def test_collision_sweep_equals_all_pairs() -> None:
    rng = np.random.default_rng(5)
    d = 2.0
    for trial in range(30):
        n = int(rng.integers(2, 60))
        pos = rng.uniform(-8.0, 8.0, (n, 3))
        pos[rng.random(n) < 0.2, 0] = 1.0  # many vehicles on the same north coordinate
        if trial % 3 == 0:
            pos[0] = pos[1] + [d, 0.0, 0.0]  # exactly the distance: not a collision
            pos[2] = pos[3] + [0.0, np.nextafter(d, 0.0), 0.0]  # just inside
        if trial % 4 == 0:
            pos[-1, rng.integers(3)] = rng.choice([np.nan, np.inf, -np.inf])
        x = np.zeros((n, 13))
        x[:, :3] = pos
        near = np.zeros(n, bool)
        pelican.collisions_into(x, d, near)
        np.testing.assert_array_equal(near, _brute_force_near(pos, d), err_msg=f"trial {trial}")


_SCENARIO = r"""
import numpy as np
from qrsim_ros.core.vehicles.pelican import PelicanFleet, PelicanParams, default_state_limits, HOVER_THROTTLE
from qrsim_ros.core.world.turbulence import DrydenTurbulence
from qrsim_ros.core.sensors.gps import GpsReceiver, GpsSpaceSegment
from qrsim_ros.core.common.rng import RandomStreams

def scenario():
    n = 3
    streams = RandomStreams(2)
    params = PelicanParams(state_limits=default_state_limits([-500, 500, -500, 500, -200, 0]),
                           dyn_noise=np.full(6, 0.1))
    fleet = PelicanFleet(n, params, streams.per_vehicle("pelican", n))
    fleet.set_state([[0, 0, -20, 0, 0, 0], [10, 0, -20, 0, 0, 1], [20, 0, -30, 0, 0, -1]])
    turb = DrydenTurbulence(n, streams=streams)
    turb.reset(fleet.state)
    space = GpsSpaceSegment(streams=streams)
    gps = GpsReceiver(n, space, streams=streams)
    space.reset()
    gps.reset(fleet.state)
    u = np.tile([0.05, -0.05, HOVER_THROTTLE + 0.02, 0.3, 11.5], (n, 1))
    out = []
    for k in range(1, 61):
        space.step(k)
        turb.step(k, fleet.state)
        fleet.step(u, turb.velocity_body)
        gps.step(k, fleet.state)
        out.append(np.concatenate([fleet.state.ravel(), fleet.accel_body.ravel(), turb.velocity_body.ravel(),
                                   gps.position_ned.ravel(), gps.position_variance_ned.ravel()]))
    return np.array(out)
"""


@needs_jit
def test_plain_python_kernels_give_the_same_numbers(tmp_path: Path) -> None:
    """QRSIM_DISABLE_JIT=1 runs the same kernels as Python: equal up to libm rounding."""
    namespace: dict[str, object] = {}
    exec(_SCENARIO, namespace)  # the same code runs in the subprocess
    compiled = namespace["scenario"]()  # type: ignore[operator]
    out = tmp_path / "plain.npy"
    code = _SCENARIO + f"\nnp.save({str(out)!r}, scenario())\n"
    env = {**os.environ, DISABLE_ENV_VAR: "1", "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    plain = np.load(out)
    assert np.all(np.isfinite(compiled))
    # 60 ticks of a chaotic closed loop: rounding differences (1e-16 relative) grow a little
    np.testing.assert_allclose(plain, compiled, rtol=1e-9, atol=1e-9)


def _fresh_interpreter(code: str, path: Path) -> str:
    """The standard output of ``code`` run by a new interpreter with the package from ``path`` (and from
    there as its working directory), the kernels compiled."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    env.pop(DISABLE_ENV_VAR, None)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=path, check=True, timeout=120,
                          capture_output=True, text=True).stdout


@needs_jit
def test_symlinked_install_uses_the_source_tree_cache(tmp_path: Path) -> None:
    """colcon's --symlink-install links each module file; the kernels must load from the source tree's
    __pycache__ (compiled by this test process's import), not compile again next to the links."""
    src = REPO_ROOT / "qrsim_ros"
    for path in src.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        link = tmp_path / "qrsim_ros" / path.relative_to(src)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path)
    code = (
        "import qrsim_ros.core.vehicles.pelican as p\n"
        "assert p.__file__.startswith(" + repr(str(tmp_path)) + "), p.__file__\n"
        "k = p._fleet_step\n"
        "assert not k.overloads  # nothing loaded at import: the kernel loads on first use\n"
        "k.load_declared()\n"
        "print(k._cache.cache_path, sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values()))\n"
    )
    cache_path, hits, misses = _fresh_interpreter(code, tmp_path).split()
    assert Path(cache_path) == src / "core" / "vehicles" / "__pycache__"
    assert (int(hits), int(misses)) == (1, 0)
    assert not list((tmp_path / "qrsim_ros" / "core").rglob("__pycache__/*.nb*"))


@needs_jit
def test_a_kernel_loads_its_declared_signatures_on_first_use_and_compiles_nothing_else() -> None:
    """Declared signatures only: the first call loads all of them (the writable twin too), a kernel
    that calls another types the call against the callee's declared signatures, and a call with other
    argument types is refused instead of compiled."""
    from qrsim_ros.core.common import jit

    @jit.njit(f"float64({jit.F8_1D_IN})", writable_twins=True)
    def total(x):
        s = 0.0
        for v in x:
            s += v
        return s

    @jit.njit(f"float64({jit.F8_1D_IN})")
    def twice_total(x):
        return 2.0 * total(x)

    assert not total.overloads and not twice_total.overloads
    assert twice_total(np.arange(4.0)) == 12.0  # compiles the caller, which loads the callee's two
    assert len(total.overloads) == 2 and len(twice_total.overloads) == 1
    assert total(np.arange(3.0)) == 3.0
    with pytest.raises(TypeError, match="No matching definition"):
        total(np.arange(3))  # int64: not declared
    assert len(total.overloads) == 2


@needs_jit
def test_a_process_loads_the_kernels_of_the_models_it_built_and_no_others() -> None:
    """``load_kernels_reachable_from``: the modules of the models reachable from a node (through
    attributes and containers) have every kernel loaded; a module only imported, or reached only
    through settings (frozen dataclasses), has none (a fresh interpreter: nothing loaded before)."""
    code = (
        "from qrsim_ros.core.common import jit\n"
        "from qrsim_ros.core.common.rng import RandomStreams\n"
        "from qrsim_ros.core.world.turbulence import DrydenTurbulence\n"
        "import qrsim_ros.core.sensors.gps as gps\n"
        "from qrsim_ros.core.vehicles.pelican import PelicanParams\n"
        "class Node:\n"
        "    pass\n"
        "node = Node()\n"
        "node.models = {'wind': [DrydenTurbulence(2, streams=RandomStreams(1))]}\n"
        "node.params = PelicanParams()\n"
        "jit.load_kernels_reachable_from(node)\n"
        "def loaded(module):\n"
        "    kernels = [d for d in jit._DECLARED if d.__module__ == module]\n"
        "    return sum(bool(d.overloads) for d in kernels), len(kernels)\n"
        "print(*loaded(DrydenTurbulence.__module__), *loaded(gps.__name__),\n"
        "      *loaded('qrsim_ros.core.vehicles.pelican'))\n"
    )
    out = _fresh_interpreter(code, REPO_ROOT).split()
    wind_loaded, wind_total, gps_loaded, gps_total, pelican_loaded, pelican_total = map(int, out)
    assert wind_total > 0 and wind_loaded == wind_total
    assert gps_total > 0 and gps_loaded == 0
    assert pelican_total > 0 and pelican_loaded == 0  # PelicanParams: settings, not a model


@needs_jit
def test_a_stop_request_ends_the_loading_between_two_kernels() -> None:
    """What a node asked to stop while it loads its kernels gets: ``stop`` is asked before each load, and
    from its first True nothing more is loaded (the rest would load on first use)."""
    code = (
        "from qrsim_ros.core.common import jit\n"
        "from qrsim_ros.core.common.rng import RandomStreams\n"
        "from qrsim_ros.core.world.turbulence import DrydenTurbulence\n"
        "wind = DrydenTurbulence(2, streams=RandomStreams(1))\n"
        "asked = []\n"
        "def stop():\n"
        "    asked.append(1)\n"
        "    return len(asked) > 2\n"  # the set-up and one kernel, then stop
        "n = jit.load_kernels_reachable_from(wind, stop=stop)\n"
        "kernels = [d for d in jit._DECLARED if d.__module__ == DrydenTurbulence.__module__]\n"
        "print(n, sum(bool(d.overloads) for d in kernels), len(kernels), len(asked),\n"
        "      jit.load_kernels_reachable_from(wind, stop=lambda: True))\n"
    )
    loaded, with_overloads, total, asked, none = map(int, _fresh_interpreter(code, REPO_ROOT).split())
    assert total > 1 and loaded == 1 and 1 <= with_overloads < total and asked == 3
    assert none == 0


@needs_jit
def test_numba_is_imported_without_coverage_unless_coverage_runs(tmp_path: Path) -> None:
    """numba imports coverage.py when it is installed; the core's kernels do not make every process pay
    for it, but a process that runs coverage (imported first) keeps numba's coverage support."""
    probe = ("import sys, qrsim_ros.core.common.jit as jit, numba.misc.coverage_support as c\n"
             "print(jit.JIT_ENABLED, 'coverage' in sys.modules, c.coverage_available)\n"
             "try:\n import coverage\nexcept ImportError:\n print(False)\nelse:\n print(True)")
    enabled, loaded, numba_sees, installed = _fresh_interpreter(probe, REPO_ROOT).split()
    assert (enabled, loaded, numba_sees) == ("True", "False", "False")
    if installed == "True":  # coverage imports afterwards, and numba uses it when it is imported first
        seen = _fresh_interpreter("import coverage, qrsim_ros.core.common.jit\n"
                                  "import numba.misc.coverage_support as c\nprint(c.coverage_available)",
                                  REPO_ROOT)
        assert seen.strip() == "True"


_CACHED_RUN = r"""
import sys, hashlib
import numpy as np
from qrsim_ros.core.common import jit
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.policies.episode import run_episode

digest = hashlib.sha256()
mission = Simulator.from_scenario("retrieve_simplified", {"seed": 7})
scene = Simulator.from_scenario("search_rescue_scene", {"seed": 3})
loaded = jit.load_kernels_reachable_from(mission, scene)
print(loaded, "numba.np.arraymath" in sys.modules)
result = run_episode(mission, "mission")
digest.update(repr((result.outcome, mission.task.mission_record(float(mission.time)))).encode())
scene.step(np.full((scene.action_rows, scene.action_spec["width"]), np.nan))
digest.update(scene.true_state().tobytes())
digest.update(scene.estimated_state().tobytes())
def arrays(value, depth=0):  # a sensor's latest readings: arrays in its attributes, lists and dicts
    if isinstance(value, np.ndarray):
        yield value
    elif depth < 3 and isinstance(value, (list, tuple)):
        for item in value:
            yield from arrays(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for key in sorted(value, key=repr):
            yield from arrays(value[key], depth + 1)
    elif depth < 3 and hasattr(value, "__dict__"):
        yield from arrays({k: v for k, v in vars(value).items() if k not in ("scene", "params")}, depth + 1)
for name in sorted(scene.sensors):  # lidar, range finders, fisheye camera
    for array in arrays(scene.sensors[name]):
        digest.update(array.tobytes())
print(digest.hexdigest())
"""


@needs_jit
def test_cached_kernels_load_without_numbas_library_and_fly_the_same(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A process that loads its kernels from the cache (every node) does not import numba's library of
    typing and lowering implementations (``numba.np.arraymath`` and the rest: about 0.4 s of CPU), and
    flies exactly what numba's own way flies (its target made complete first, as here in the test's
    process): a retrieve mission (its record) and a step of the search-and-rescue scene (ray-cast
    sensors and cameras), bit for bit."""
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()
    # first here: a kernel missing from the cache (a kernel module just edited) compiles into it now
    exec(compile(_CACHED_RUN, "cached_run", "exec"), {"__name__": "cached_run"})
    full = capsys.readouterr().out.split()
    light = _fresh_interpreter(_CACHED_RUN, REPO_ROOT).split()
    assert int(light[0]) > 20 and light[1] == "False", light
    assert full[1] == "True" and light[2] == full[2]


@needs_jit
def test_overload_for_gives_the_code_a_call_would_run_or_the_kernel() -> None:
    """``overload_for`` picks the overload the dispatcher picks (a C-contiguous array for an 'A' one, a
    readonly array for the readonly twin), whose code computes what the call computes; for arguments no
    declared signature takes (a readonly output array), it gives the kernel back, which refuses them."""
    from qrsim_ros.core.common.jit import all_finite, overload_for
    from qrsim_ros.core.vehicles.energy import _supply_fraction_kernel

    x = np.array([[1.0, 2.0], [3.0, np.nan]])
    readonly = x.copy()
    readonly.flags.writeable = False
    for args in ((x,), (x[:1],), (readonly,), (x[:, ::2],)):
        code = overload_for(all_finite, args)
        assert code is not all_finite and code(*args) == all_finite(*args) == np.isfinite(args[0]).all()
    assert overload_for(all_finite, (x,)) is not overload_for(all_finite, (readonly,))

    volts, empty, out = np.array([11.0, 12.0]), np.array([False, True]), np.zeros(2)
    code = overload_for(_supply_fraction_kernel, (volts, empty, 12.0, out))
    assert code is not _supply_fraction_kernel
    code(volts, empty, 12.0, out)
    assert out.tolist() == [11.0 / 12.0, 0.0]
    frozen = out.copy()
    frozen.flags.writeable = False
    assert overload_for(_supply_fraction_kernel, (volts, empty, 12.0, frozen)) is _supply_fraction_kernel
    with pytest.raises(TypeError):
        _supply_fraction_kernel(volts, empty, 12.0, frozen)
