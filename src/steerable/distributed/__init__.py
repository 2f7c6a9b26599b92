"""Where episodes run, beyond one process: the Ray executor (`--executor.backend ray`).

The same per-episode pipeline as the local executor (`steerable.annotate.executor`), placed in Ray
actors; ray itself is imported only when a run asks for it (extra `[ray]`).
"""

from steerable.distributed.ray_executor import RayExecutor

__all__ = ["RayExecutor"]
