"""Big zero arrays written in small patches, paid for 4 KB page by page.

numpy advises the kernel to back arrays of 4 MB and more with transparent huge pages; with THP in
``madvise`` mode (this machine, and most distributions' default) the first write into a 2 MB region then
faults in, compacts and zeroes a whole huge page. For a map the size of a search area (6,929 x 6,929
cells at 100 vehicles) written one camera frame at a time, that is what the writes cost: measured here
2.5-4.5 ms per huge page, 121 us per newly touched map row, against 6 us for a 4 KB page. An anonymous
``mmap`` outside numpy's allocator gets no such advice: its pages come 4 KB at a time, zero, as they are
first written.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np
from numpy.typing import DTypeLike


def paged_zeros(shape: tuple[int, ...], dtype: DTypeLike = np.float64) -> np.ndarray[Any, Any]:
    """A writable C-ordered zero array of ``shape`` whose memory is taken as it is first written."""
    dt = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if size == 0:
        return np.zeros(shape, dt)
    return np.frombuffer(mmap.mmap(-1, size), dtype=dt).reshape(shape)
