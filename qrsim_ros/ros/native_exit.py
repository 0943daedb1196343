"""An exit with a chosen status that needs no Python: a POSIX timer whose expiry calls ``_exit(status)``
in a thread of the C library's own (``timer_create`` with ``SIGEV_THREAD``, Linux/glibc, through ctypes).

The stop watchdog (``qrsim_ros.ros.node.StopWatchdog``) ends a node whose clean-up hangs. Its Python
timer cannot run while the main thread is blocked in a native call that holds the interpreter lock
(rclpy's ``destroy_node`` in a DDS teardown under load held it for over 9 s in a CI run), and
``faulthandler``'s C-level fallback can only ``_exit(1)``: a node whose work was complete then failed
its run. This timer ends such a process with the status the watchdog chose.
"""

from __future__ import annotations

import ctypes
import sys

#: <time.h> / <signal.h> constants (Linux).
_CLOCK_MONOTONIC = 1
_SIGEV_THREAD = 2


class _Sigevent(ctypes.Structure):
    """``struct sigevent`` (64 bytes on Linux): the value, signal, notify kind, then the SIGEV_THREAD
    function and attributes in the padding union."""

    _fields_ = [("sigev_value", ctypes.c_void_p), ("sigev_signo", ctypes.c_int),
                ("sigev_notify", ctypes.c_int), ("function", ctypes.c_void_p),
                ("attributes", ctypes.c_void_p), ("_pad", ctypes.c_int * 8)]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class NativeExitTimer:
    """``_exit(status)`` after ``seconds`` of monotonic time, unless cancelled; runs with the interpreter
    lock held elsewhere. ``available`` is False where the C library lacks POSIX timers (then nothing is
    armed and the caller keeps its own fallback)."""

    def __init__(self) -> None:
        self._timer = ctypes.c_void_p()
        self._armed = False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            self._create, self._settime = libc.timer_create, libc.timer_settime
            self._delete = libc.timer_delete
            self._exit_address = ctypes.cast(libc._exit, ctypes.c_void_p).value
        except (OSError, AttributeError):
            self.available = False
            return
        self.available = sys.platform.startswith("linux") and ctypes.sizeof(_Sigevent) == 64

    def arm(self, seconds: float, status: int) -> bool:
        """Arm (re-arm) the timer; True if armed."""
        self.cancel()
        if not self.available:
            return False
        event = _Sigevent(sigev_value=status & 0xFF, sigev_notify=_SIGEV_THREAD, function=self._exit_address)
        if self._create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(self._timer)) != 0:
            return False
        whole = int(max(seconds, 0.001))
        spec = _Itimerspec(it_value=_Timespec(whole, int((max(seconds, 0.001) - whole) * 1e9)))
        if self._settime(self._timer, 0, ctypes.byref(spec), None) != 0:
            self._delete(self._timer)
            return False
        self._armed = True
        return True

    def cancel(self) -> None:
        if self._armed:
            self._delete(self._timer)
            self._armed = False
