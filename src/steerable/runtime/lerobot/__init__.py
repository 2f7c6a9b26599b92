"""steerable's runtime over LeRobot: its policies as the low level, its robots and gym simulators as
environments (entries of `steerable.runtime.environments`). Everything here imports `lerobot` itself
(extra `lerobot`, Python >= 3.12); nothing else in steerable does.
"""
