"""A local OpenAI-compatible chat server for tests and benchmarks (a test tool, not a model).

    with TestServer(latency_s=0.05, capacity=8, faults=FaultPlan(rate=0.2)) as server:
        ...  # point an OpenAI client at server.url

or from a shell: `python -m steerable.testing.server --port 8000 --latency 0.05 --capacity 8`.
"""

from steerable.testing.server.app import Responder, ServerStats, TestServer
from steerable.testing.server.faults import FAULT_KINDS, FaultPlan
from steerable.testing.server.instances import minimal_instance

__all__ = ["FAULT_KINDS", "FaultPlan", "Responder", "ServerStats", "TestServer", "minimal_instance"]
