"""core/common/paged.py: big zero arrays that take memory 4 KB at a time as they are written."""

from __future__ import annotations

import os

import numpy as np

from qrsim_ros.core.common.paged import paged_zeros


def test_a_paged_array_is_a_writable_zero_array_of_its_shape_and_type() -> None:
    a = paged_zeros((3, 4), bool)
    assert a.shape == (3, 4) and a.dtype == bool and not a.any()
    assert a.flags.writeable and a.flags.c_contiguous
    a[1, 2] = True
    assert a.sum() == 1 and a[1, 2]
    b = paged_zeros((5,))
    b += np.arange(5.0)
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert paged_zeros((0, 7)).shape == (0, 7)


def _resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_writing_a_patch_of_a_big_paged_array_takes_only_that_patchs_memory() -> None:
    before_mb = _resident_mb()
    a = paged_zeros((8000, 8000))  # 512 MB if all of it were taken
    a[::80, 100:200] = 1.0  # 100 rows 5 MB apart: 100 pages of 4 KB (or 100 huge pages of 2 MB each)
    grown_mb = _resident_mb() - before_mb
    assert a.sum() == 10_000.0
    assert grown_mb < 20, grown_mb
