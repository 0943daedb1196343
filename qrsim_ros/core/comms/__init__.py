"""The vehicles' range-limited radio (docs/COMMS.md): parameters (``params``), which links are up
(``links``), the model stepped per tick (``radio``), and delivered packets with their inboxes (``packets``).
Pure numpy/scipy; no ROS.

The package gives the parameters and packets, which a scenario's validation and the front ends' message
code need; the model (``comms.radio.Radio``) is imported from its module, since its links cast rays
through the scene (numba kernels) and loading a scenario should not pay for them."""

from qrsim_ros.core.comms.packets import Inboxes, Packet
from qrsim_ros.core.comms.params import BROADCAST, MODES, CommsParams

__all__ = ["BROADCAST", "MODES", "CommsParams", "Inboxes", "Packet"]
