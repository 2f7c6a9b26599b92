"""Local web viewer for LeRobot v3 datasets: a read-only server and a static export.

`steerable view DATASET` serves it; `export_site` (and `steerable view --export DIR`) writes the
static site that opens from disk.
"""

from steerable.viewer.export import export_site
from steerable.viewer.server import ViewerServer, make_server
from steerable.viewer.site import ViewerData

__all__ = ["ViewerData", "ViewerServer", "export_site", "make_server"]
