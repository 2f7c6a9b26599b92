"""The language runtime: steer a robot (or the simulator) with a task, interjections and questions.

The contracts it drives live in `steerable.control` (environment, high-level model, low-level
controller); environments are built by name through `steerable.runtime.environments`. The rest of
the package builds the control loop, the REPL, recording and evaluation on them.
"""
