"""The vehicles' range-limited radio (docs/COMMS.md): parameters (``params``), which links are up
(``links``), the model stepped per tick (``radio``), and delivered packets with their inboxes (``packets``).
Pure numpy/scipy; no ROS."""

from qrsim_ros.core.comms.packets import Inboxes, Packet
from qrsim_ros.core.comms.params import BROADCAST, MODES, CommsParams
from qrsim_ros.core.comms.radio import LOSS_STREAM, Radio

__all__ = ["BROADCAST", "LOSS_STREAM", "MODES", "CommsParams", "Inboxes", "Packet", "Radio"]
