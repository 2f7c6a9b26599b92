"""A baseline that must work: plain behaviour cloning over privileged state, single-step tasks (issue 21, item 2).

An MLP reads [gripper state (4), every object's true position (`observation.environment_state`, 39),
a one-hot of the task's cube (6) and of its receptacle (5)], standardised, and predicts the next
`horizon` actions (absolute gripper pose targets `ee.x, ee.y, ee.z, gripper.closure`, or their
offsets from the current pose with `delta`), standardised per dimension, with an L1 loss. It is
trained on the single-step episodes ("put the X cube in the Y", one pick and one place) of an easy
`make-dataset synthetic --privileged_state` dataset (made with seed 0), then run closed loop as the
low level of the runtime (`steerable.runtime.evaluation.run_episode(..., low=controller)`, direct
task, no high level) on held-out single-step seeds: the first `--eval_episodes` seeds from
`EVAL_SEED` whose drawn task is a single step. The simulator draws seed s's scene from
rng([s, 7]), the dataset's episode e from rng([0, e]): seeds from 1000 never repeat a training scene.

The controller never reports its command done, so each episode runs `--max_seconds` of simulated
time and is scored by `SimEnv.success()` at the end. Each variant prints its success with the 95 %
Wilson interval and a failure breakdown (read from the world state at every chunk): never grasped
the named cube (closest xy approach with the fingers low), grasped but not released in the
receptacle, succeeded once and undid it later.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bc_baseline.py --work /tmp/bc

Not part of `make test` (a few CPU minutes); tests/test_bc_baseline.py checks its pieces.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from steerable.control import ActionChunk, Observation
from steerable.synthetic.commands import CommandError
from steerable.synthetic.env import SimEnv, task_kind
from steerable.synthetic.generate import recorded_scene
from steerable.synthetic.privileged import (
    ENVIRONMENT_STATE_FEATURE,
    ENVIRONMENT_STATE_NAMES,
    environment_state,
)
from steerable.synthetic.replay import wilson_interval
from steerable.synthetic.tasks import Step, parse_task, task_done
from steerable.synthetic.world import CUBE_COLORS, GRASP_THRESHOLD, RECEPTACLE_COLORS, WorldState

EVAL_SEED = 1000
CUBES = tuple(f"{c} cube" for c in CUBE_COLORS)
RECEPTACLES = tuple(RECEPTACLE_COLORS)
# Where each object's x sits in the environment state (its documented names, e.g. "red_cube.x", "blue_bin.x").
CUBE_SLOT = {c: ENVIRONMENT_STATE_NAMES.index(f"{c.replace(' ', '_')}.x") for c in CUBES}
RECEPTACLE_SLOT = {r: ENVIRONMENT_STATE_NAMES.index(f"{r.replace(' ', '_')}.x") for r in RECEPTACLES}


# -- data -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Episode:
    index: int
    task: str
    step: Step
    state: np.ndarray  # (T, 4) observation.state
    env_state: np.ndarray  # (T, 39) observation.environment_state
    action: np.ndarray  # (T, 4)


def single_step(steps: tuple[Step, ...]) -> Step | None:
    """The one step of a single pick-and-place into a receptacle, else None."""
    return steps[0] if steps and task_kind(steps) == "single" else None


def load_episodes(dataset: Path, seed: int = 0, difficulty: str = "easy") -> tuple[list[Episode], int]:
    """The single-step episodes of a synthetic `--privileged_state` dataset made with `seed` (their steps
    from the generator's own task draw, checked against the stored task text), and the episode count."""
    import pyarrow.parquet as pq

    from steerable.dataset import open_dataset

    ds = open_dataset(dataset)
    tasks = pq.read_table(dataset / "meta" / "tasks.parquet").to_pandas()
    names = {int(i): str(t) for t, i in zip(tasks.index, tasks["task_index"], strict=True)}
    columns = ["observation.state", ENVIRONMENT_STATE_FEATURE, "action", "task_index"]
    out: list[Episode] = []
    n = ds.info.total_episodes
    for ep in range(n):
        _, spec = recorded_scene(seed, ep, difficulty)
        step = single_step(spec.steps)
        if step is None:
            continue
        table = ds.read_episode(ep, columns)
        text = names[int(table.column("task_index")[0].as_py())]
        if text != spec.text:
            raise SystemExit(f"episode {ep}: stored task {text!r} is not the generator's {spec.text!r} "
                             f"(was the dataset made with --seed {seed} --difficulty {difficulty}?)")

        def col(name: str, tbl: Any = table) -> np.ndarray:
            return np.asarray(tbl.column(name).to_pylist(), dtype=np.float32)

        out.append(Episode(ep, text, step, col("observation.state"), col(ENVIRONMENT_STATE_FEATURE), col("action")))
    return out, n


def task_code(step: Step) -> np.ndarray:
    """One-hot of the step's cube (palette order) and receptacle (11,)."""
    code = np.zeros(len(CUBES) + len(RECEPTACLES), dtype=np.float32)
    code[CUBES.index(step.cube)] = 1.0
    code[len(CUBES) + RECEPTACLES.index(step.target)] = 1.0
    return code


def features(state: np.ndarray, env_state: np.ndarray, step: Step, inputs: str = "plain") -> np.ndarray:
    """(T, 54) model inputs: gripper state, environment state, the task's one-hot. `inputs="gathered"`
    appends the named cube's x, y, z and its receptacle's x, y (read from the environment state's
    slots, so still privileged state only) and both relative to the gripper: (T, 64)."""
    state, env_state = np.atleast_2d(state), np.atleast_2d(env_state)
    code = np.broadcast_to(task_code(step), (len(state), len(CUBES) + len(RECEPTACLES)))
    parts = [state, env_state, code]
    if inputs == "gathered":
        c = CUBE_SLOT[step.cube]
        r = RECEPTACLE_SLOT[step.target]
        cube, rec = env_state[:, c: c + 3], env_state[:, r: r + 2]
        parts += [cube, rec, cube - state[:, :3], rec - state[:, :2]]
    elif inputs != "plain":
        raise ValueError(f"inputs {inputs!r}: plain or gathered")
    return np.concatenate(parts, axis=1).astype(np.float32)


def chunks(action: np.ndarray, horizon: int) -> np.ndarray:
    """(T, horizon, 4): the actions from each frame on, the last one repeated past the end."""
    idx = np.minimum(np.arange(len(action))[:, None] + np.arange(horizon)[None, :], len(action) - 1)
    return action[idx]


# -- model ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BCConfig:
    horizon: int = 10  # actions predicted per chunk
    n_exec: int = 8  # actions of a chunk executed before the next inference
    delta: bool = False  # predict offsets from the current pose (xyz) instead of absolute targets
    steps: int = 3000
    batch: int = 256
    hidden: int = 256
    lr: float = 1e-3
    chunk_hz: float = 5.0  # the runtime's chunk-inference rate (LoopRates.chunk_hz)
    inputs: str = "plain"  # "gathered": also the named cube's and receptacle's positions (see `features`)
    drop_pauses: bool = False  # train without the expert's pauses (frames whose command repeats the last)
    velocity: bool = False  # also read the last commanded motion (action[t-1] - action[t-2], xyz)
    seed: int = 0


@dataclass
class BCModel:
    cfg: BCConfig
    net: Any  # torch.nn.Module
    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: np.ndarray  # (4,)
    y_std: np.ndarray  # (4,)
    train_seconds: float = 0.0
    final_loss: float = float("nan")

    def predict(self, x: np.ndarray, state: np.ndarray) -> np.ndarray:
        """(B, horizon, 4) actions in robot units for inputs (B, 54) and gripper states (B, 4)."""
        import torch

        with torch.no_grad():
            z = torch.from_numpy(((x - self.x_mean) / self.x_std).astype(np.float32))
            y = self.net(z).numpy().reshape(len(x), self.cfg.horizon, 4)
        y = y * self.y_std + self.y_mean
        if self.cfg.delta:
            y[..., :3] += state[:, None, :3]
        return y.astype(np.float32)


def last_motion(action: np.ndarray) -> np.ndarray:
    """(T, 3): the motion the previous two commands made before each frame (zero for the first two)."""
    out = np.zeros((len(action), 3), dtype=np.float32)
    out[2:] = action[1:-1, :3] - action[:-2, :3]
    return out


def inputs_of(ep: Episode, cfg: BCConfig) -> np.ndarray:
    x = features(ep.state, ep.env_state, ep.step, cfg.inputs)
    return np.concatenate([x, last_motion(ep.action)], axis=1) if cfg.velocity else x


def _targets(ep: Episode, cfg: BCConfig) -> np.ndarray:
    y = chunks(ep.action, cfg.horizon)
    if cfg.delta:
        y = y.copy()
        y[..., :3] -= ep.state[:, None, :3]
    return y


def without_pauses(ep: Episode) -> Episode:
    """`ep` without the frames where the expert held still (its command equals the previous frame's:
    the start, the random pauses after a pick or before a place, the end): the world follows each
    command exactly, so the rest is still a valid trajectory, and a still pose no longer maps to both
    "wait" and "go" depending on a pause length the state cannot show."""
    keep = np.ones(len(ep.action), dtype=bool)
    keep[1:] = np.any(ep.action[1:] != ep.action[:-1], axis=1)
    return replace(ep, state=ep.state[keep], env_state=ep.env_state[keep], action=ep.action[keep])


def train(episodes: list[Episode], cfg: BCConfig, *, log_every: int = 0) -> BCModel:
    import torch
    from torch import nn

    started = time.perf_counter()
    if cfg.drop_pauses:
        episodes = [without_pauses(e) for e in episodes]
    torch.manual_seed(cfg.seed)
    x = np.concatenate([inputs_of(e, cfg) for e in episodes])
    y = np.concatenate([_targets(e, cfg) for e in episodes])  # (N, H, 4)
    x_mean, x_std = x.mean(0), np.maximum(x.std(0), 1e-3)
    flat = y.reshape(-1, 4)
    y_mean, y_std = flat.mean(0), np.maximum(flat.std(0), 1e-3)
    xt = torch.from_numpy((x - x_mean) / x_std)
    yt = torch.from_numpy(((y - y_mean) / y_std).reshape(len(y), -1).astype(np.float32))
    net = nn.Sequential(nn.Linear(x.shape[1], cfg.hidden), nn.GELU(), nn.Linear(cfg.hidden, cfg.hidden), nn.GELU(),
                        nn.Linear(cfg.hidden, cfg.hidden), nn.GELU(), nn.Linear(cfg.hidden, cfg.horizon * 4))
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.05)
    gen = torch.Generator().manual_seed(cfg.seed)
    loss = torch.tensor(float("nan"))
    for i in range(cfg.steps):
        batch = torch.randint(0, len(xt), (cfg.batch,), generator=gen)
        loss = (net(xt[batch]) - yt[batch]).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if log_every and (i + 1) % log_every == 0:
            print(f"  step {i + 1}: L1 {loss.item():.4f}", file=sys.stderr)
    net.eval()
    return BCModel(cfg, net, x_mean, x_std, y_mean, y_std, time.perf_counter() - started, float(loss.item()))


# -- the controller ----------------------------------------------------------------------------------
@dataclass
class Trace:
    """What one closed-loop episode did, read from the world at each chunk inference."""

    grasped: bool = False  # the named cube was held at some point
    succeeded_once: bool = False
    closest_open_cm: float = float("inf")  # closest xy approach to the cube with the fingers open and low
    first_close: tuple[float, float] | None = None  # (xy cm from the cube, z cm above its centre) at closing
    wrong_grasp: bool = False  # another cube held


class BCController:
    """The baseline as a `steerable.control.LowLevelController`: the command is the task text (direct
    task), parsed with the synthetic grammar against the observed scene; reads privileged state only."""

    name = "bc baseline (privileged state)"
    wants_images = False

    def __init__(self, model: BCModel) -> None:
        self.model = model
        self.trace = Trace()
        self._steps: dict[str, Step] = {}
        self._was_closed = False
        self._sent: list[np.ndarray] = []  # the last two actions handed out (velocity input)

    def reset(self) -> None:
        self.trace = Trace()
        self._steps.clear()
        self._was_closed = False
        self._sent = []

    def _step(self, command: str, world: WorldState) -> Step:
        if command not in self._steps:
            step = single_step(parse_task(command, world.scene))
            if step is None:
                raise CommandError(f"not a single-step task: {command!r}")
            self._steps[command] = step
        return self._steps[command]

    def act(self, observation: Observation, command: str) -> ActionChunk:
        world = observation.privileged
        if not isinstance(world, WorldState):
            return ActionChunk(np.zeros((0, 4), np.float32), error="the BC baseline needs the simulator's state")
        try:
            step = self._step(command, world)
        except CommandError as exc:
            return ActionChunk(np.zeros((0, 4), np.float32), error=str(exc))
        self._observe(world, step)
        cfg = self.model.cfg
        x = features(observation.state, environment_state(world), step, cfg.inputs)
        if cfg.velocity:  # every action handed out is executed (direct task: no chunk is discarded)
            motion = self._sent[-1][:3] - self._sent[-2][:3] if len(self._sent) == 2 else np.zeros(3, np.float32)
            x = np.concatenate([x, motion[None].astype(np.float32)], axis=1)
        actions = self.model.predict(x, np.atleast_2d(observation.state))[0][: cfg.n_exec]
        self._sent = [*self._sent, *actions][-2:]
        return ActionChunk(actions)

    def _observe(self, world: WorldState, step: Step) -> None:
        t = self.trace
        i = world.scene.cube_index(step.cube)
        cx, cy, cz = world.positions[i]
        g = world.gripper
        dxy = 100 * float(np.hypot(g.x - cx, g.y - cy))
        closed = g.closure >= GRASP_THRESHOLD
        if not closed and g.z < cz + 0.06:
            t.closest_open_cm = min(t.closest_open_cm, dxy)
        if closed and not self._was_closed and t.first_close is None:
            t.first_close = (dxy, 100 * (g.z - (cz + world.scene.cubes[i].size / 2)))
        self._was_closed = closed
        t.grasped = t.grasped or world.held == i
        t.wrong_grasp = t.wrong_grasp or (world.held is not None and world.held != i)
        t.succeeded_once = t.succeeded_once or task_done(world, (step,))


# -- evaluation --------------------------------------------------------------------------------------
def held_out_single_seeds(n: int, start: int = EVAL_SEED, difficulty: str = "easy") -> list[int]:
    """The first `n` seeds from `start` whose drawn task (at `difficulty`) is a single step."""
    env, seeds, seed = SimEnv(cameras=()), [], start
    while len(seeds) < n:
        if env.reset(seed, difficulty=difficulty).kind == "single":
            seeds.append(seed)
        seed += 1
    return seeds


@dataclass
class EvalResult:
    successes: int
    episodes: int
    traces: list[tuple[int, bool, Trace]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.successes / max(self.episodes, 1)


def evaluate(model: BCModel, seeds: list[int], max_seconds: float = 30.0) -> EvalResult:
    """Closed loop through the runtime (direct task, this controller as the low level)."""
    from steerable.runtime.environments import EnvSpec
    from steerable.runtime.evaluation import run_episode
    from steerable.runtime.loop import LoopRates
    from steerable.runtime.stack import StackSpec

    spec = StackSpec(high_level="none", low_level="scripted")  # low_level is replaced by `low=` below
    env = EnvSpec("sim", {"difficulty": "easy"})  # no rendering: the controller wants no images
    controller = BCController(model)
    out = EvalResult(0, 0)
    for seed in seeds:
        result = run_episode(spec, seed, env=env, max_seconds=max_seconds, low=controller,
                             rates=LoopRates(ctrl_hz=spec.fps, chunk_hz=model.cfg.chunk_hz))
        if result.kind != "single":
            raise SystemExit(f"seed {seed}: drew a {result.kind} task; expected a single step")
        out.successes += int(result.success)
        out.episodes += 1
        out.traces.append((seed, result.success, controller.trace))
    return out


def on_training_scenes(model: BCModel, episodes: list[Episode], max_seconds: float = 30.0,
                       seed: int = 0) -> float:
    """Success closed loop from the initial scenes of `episodes` (training scenes, `SimEnv.reset_to_recorded`):
    the same runtime loop as `evaluate`, to tell fitting from generalising."""
    from steerable.runtime.loop import LoopRates, Runtime

    env = SimEnv(cameras=())
    controller = BCController(model)
    ok = 0
    for ep in episodes:
        drawn = env.reset_to_recorded(seed, ep.index)
        rt = Runtime(env, controller, None, rates=LoopRates(ctrl_hz=env.fps, chunk_hz=model.cfg.chunk_hz))
        rt.submit("task", drawn.task)
        while rt.frame < max_seconds * env.fps:
            rt.tick()
            rt.clock.wait_next()
        ok += bool(env.success())
    return ok / max(len(episodes), 1)


def offline_error_cm(model: BCModel, episodes: list[Episode]) -> float:
    """Mean xy distance (cm) between the predicted and the recorded action `n_exec` steps ahead."""
    k = model.cfg.n_exec - 1
    errs = []
    for ep in episodes:
        pred = model.predict(inputs_of(ep, model.cfg), ep.state)[:, k, :2]
        true = chunks(ep.action, model.cfg.horizon)[:, k, :2]
        errs.append(np.hypot(*(pred - true).T))
    return 100 * float(np.mean(np.concatenate(errs)))


def failure_breakdown(result: EvalResult) -> str:
    fails = [t for _, ok, t in result.traces if not ok]
    if not fails:
        return "-"
    never = [t for t in fails if not t.grasped]
    undone = sum(t.succeeded_once for t in fails)
    closes = [t.first_close for t in never if t.first_close is not None]
    parts = [f"never grasped {len(never)}"]
    if never:
        parts.append(f"(closest open approach median {np.median([t.closest_open_cm for t in never]):.1f} cm")
        if closes:
            parts[-1] += (f"; at first close xy {np.median([c[0] for c in closes]):.1f} cm, "
                          f"z {np.median([c[1] for c in closes]):+.1f} cm from the cube centre")
        parts[-1] += ")"
    parts.append(f"grasped, not placed {len(fails) - len(never) - undone}")
    parts.append(f"placed then undone {undone}")
    return ", ".join(parts)


# -- the benchmark -----------------------------------------------------------------------------------
def make_dataset(out: Path, episodes: int) -> None:
    if (out / "meta" / "info.json").is_file():
        return
    subprocess.run([sys.executable, "-m", "steerable.cli.main", "make-dataset", "synthetic", "--out", str(out),
                    "--episodes", str(episodes), "--difficulty", "easy", "--privileged_state", "--cameras", "top"],
                   check=True, capture_output=True)


_PLAIN = BCConfig()
_BEST = BCConfig(inputs="gathered", delta=True, drop_pauses=True, velocity=True)
# One change at a time from the plain baseline (see benchmarks/README.md, "bc_baseline.py").
VARIANTS: dict[str, BCConfig] = {
    "plain: absolute actions, one-hot task, horizon 10, 8 executed": _PLAIN,
    "delta actions (offsets from the current pose)": replace(_PLAIN, delta=True),
    "gathered inputs (the named cube's and receptacle's positions)": replace(_PLAIN, inputs="gathered"),
    "gathered + delta": replace(_PLAIN, inputs="gathered", delta=True),
    "plain + pauses dropped": replace(_PLAIN, drop_pauses=True),
    "gathered + delta + pauses dropped": replace(_BEST, velocity=False),
    "gathered + delta + pauses dropped + last motion (best)": _BEST,
    "best, 3 executed per chunk": replace(_BEST, n_exec=3),
}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bc_baseline"))
    parser.add_argument("--episodes", type=int, default=300, help="episodes of the generated dataset")
    parser.add_argument("--eval_episodes", type=int, default=50)
    parser.add_argument("--max_seconds", type=float, default=30.0)
    parser.add_argument("--variants", default="", help="comma-separated variant numbers (default all)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--train_scenes", type=int, default=30, help="training episodes also run closed loop")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = args.work / f"data{args.episodes}"
    make_dataset(data, args.episodes)
    episodes, total = load_episodes(data)
    frames = sum(len(e.action) for e in episodes)
    seeds = held_out_single_seeds(args.eval_episodes)
    print(f"training data: {len(episodes)} single-step episodes of {total} ({frames} frames); "
          f"held-out seeds {seeds[0]}-{seeds[-1]} ({len(seeds)} single-step)")
    chosen = [int(v) for v in args.variants.split(",") if v] or list(range(1, len(VARIANTS) + 1))
    rows, results = [], {}
    for number, (label, cfg) in enumerate(VARIANTS.items(), start=1):
        if number not in chosen:
            continue
        model = train(episodes, cfg)
        started = time.perf_counter()
        res = evaluate(model, seeds, args.max_seconds)
        low, high = wilson_interval(res.successes, res.episodes)
        seen = on_training_scenes(model, episodes[: args.train_scenes], args.max_seconds)
        rows.append((number, label, res, low, high, model, seen))
        results[f"v{number}"] = res.rate
        print(f"[{number}] {label}: {res.successes}/{res.episodes} = {res.rate:.2f} ({low:.2f}-{high:.2f}); "
              f"training scenes {seen:.2f}; train {model.train_seconds:.0f} s, L1 {model.final_loss:.4f}; "
              f"eval {time.perf_counter() - started:.0f} s; {failure_breakdown(res)}", flush=True)
    print()
    print(f"| # | variant | success ({len(seeds)} held-out single-step seeds) | 95 % Wilson | "
          f"training scenes ({min(args.train_scenes, len(episodes))}) | train s | final L1 | failures |")
    print("|---|---|---|---|---|---|---|---|")
    for number, label, res, low, high, model, seen in rows:
        print(f"| {number} | {label} | {res.successes}/{res.episodes} = {res.rate:.2f} | {low:.2f}-{high:.2f} | "
              f"{seen:.2f} | {model.train_seconds:.0f} | {model.final_loss:.4f} | {failure_breakdown(res)} |")
    best = max(rows, key=lambda r: r[2].rate)
    print(f"RESULT best_variant={best[0]} best_success={best[2].rate:.3f} best_low95={best[3]:.3f} "
          + " ".join(f"{k}={v:.3f}" for k, v in results.items())
          + f" train_episodes={len(episodes)} eval_episodes={len(seeds)}")
    (args.work / "bc_results.json").write_text(json.dumps(
        {str(r[0]): {"label": r[1], "success": r[2].rate, "low95": r[3], "high95": r[4],
                     "train_s": r[5].train_seconds, "cfg": r[5].cfg.__dict__} for r in rows}, indent=1))


if __name__ == "__main__":
    main()
