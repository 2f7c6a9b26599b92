"""Local web viewer for LeRobot v3 datasets: a read-only server and a static export."""
