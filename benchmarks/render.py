"""Benchmark: render every frame of long annotated episodes, indexed timeline vs a plain scan.

The scan renderer below is a straightforward implementation of the reference semantics (every
resolver filters the whole persistent list, nth_* sorts it, templates are regex substitutions). Both
render the same frames with `compat="lerobot"`, the outputs are compared frame by frame, and our
default mode is timed alongside. Times are CPU seconds, best of `--repeat` runs.

Then the whole command, process to process: `steerable render DATASET --recipe subtask_mem_vqa_speech
--all --json` (start-up, imports, reading, rendering, JSON to /dev/null), the median wall time of
`--process_runs` runs after a warm-up, on a dataset written to disk (`--process_episodes` episodes
of `--process_frames` frames, or `--dataset DIR`), beside the in-memory render of the same frames.
With `--lerobot_python PATH` (a Python with lerobot 0.6.x and `datasets`, `pandas`, `pyyaml`; torch is
not needed), the same dataset is also rendered by LeRobot's own `render_sample` through
`benchmarks/lerobot_render_driver.py`, paired with `steerable render --compat lerobot` on one recipe file
both accept: samples compared frame by frame, then the two commands in turn, the ratio pair by pair.
Run: `python benchmarks/render.py [--episodes 5 --frames 3000 --span 40 --process_runs 5]`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from hashlib import blake2b
from pathlib import Path
from typing import Any

import numpy as np

from steerable.recipes import EpisodeTimeline, Recipe, RenderOptions, load_recipe, render_sample
from steerable.recipes.expressions import PLACEHOLDER_RE, ResolverCall

FPS = 30
CAMERAS = ("observation.images.top", "observation.images.wrist")
Row = dict[str, Any]
Episode = tuple[list[Row], list[list[Row]], list[float]]

# The built-in subtask_mem_vqa_speech as LeRobot 0.6.1's load_recipe accepts it (0.6.1 ships no recipe
# files and refuses the built-ins): no description/cameras/route keys, literal camera keys, and a target
# on the low-level turn (0.6.1 wants one in every message recipe). 0.6.1 also resolves its default
# `vqa`/`vqa_query` bindings (no camera) in every component, which raises on a two-camera VQA frame, so
# the components that do not ask VQA pin them to a camera (unused there). Steerable loads it unchanged.
_PIN = "".join(f"      {name}: emitted_at(t, style=vqa, role={role}, camera=observation.images.top)\n"
               for name, role in (("vqa", "assistant"), ("vqa_query", "user")))
LEROBOT_061_RECIPE = """\
blend:
  high_level_subtask:
    weight: 0.25
    bindings:
""" + _PIN + """\
    messages:
      - {role: user, content: "${task}", stream: high_level}
      - {role: assistant, content: "${subtask}", stream: high_level, target: true, if_present: subtask}
  low_level_execution:
    weight: 0.40
    bindings:
""" + _PIN + """\
    messages:
      - {role: user, content: "${subtask}", stream: low_level, target: true, if_present: subtask}
  memory_update:
    weight: 0.10
    bindings:
      prior_memory: nth_prev(t, style=memory, offset=1)
      current_memory: active_at(t, style=memory)
      completed_subtask: nth_prev(t, style=subtask, offset=1)
""" + _PIN + """\
    messages:
      - {role: user, content: "${task}", stream: high_level}
      - {role: assistant, content: "Memory so far: ${prior_memory}", stream: high_level, if_present: prior_memory}
      - {role: user, content: "Just finished: ${completed_subtask}", stream: high_level, if_present: completed_subtask}
      - {role: assistant, content: "${current_memory}", stream: high_level, target: true, if_present: current_memory}
  user_interjection_response:
    weight: 0.10
    bindings:
""" + _PIN + """\
    messages:
      - {role: user, content: "${task}", stream: high_level}
      - {role: user, content: "${interjection}", stream: high_level, if_present: interjection}
      - {role: assistant, stream: high_level, target: true, tool_calls_from: speech, if_present: speech}
""" + "".join(f"""\
  ask_vqa_{cam}:
    weight: 0.075
    bindings:
      vqa_query: emitted_at(t, style=vqa, role=user, camera=observation.images.{cam})
      vqa: emitted_at(t, style=vqa, role=assistant, camera=observation.images.{cam})
    messages:
      - role: user
        stream: high_level
        if_present: vqa_query
        content:
          - {{type: image, feature: observation.images.{cam}}}
          - {{type: text, text: "${{vqa_query}}"}}
      - {{role: assistant, content: "${{vqa}}", stream: high_level, target: true, if_present: vqa}}
""" for cam in ("top", "wrist"))


def _row(style: str | None, content: str | None, ts: float | None = None, role: str = "assistant",
         camera: str | None = None, tool_calls: list[Any] | None = None) -> Row:
    row: Row = {"role": role, "content": content, "style": style}
    if ts is not None:
        row["timestamp"] = ts
    return {**row, "camera": camera, "tool_calls": tool_calls}


def make_episode(rng: random.Random, frames: int, span: int) -> Episode:
    """A synthetic annotated episode: subtask/plan/memory/motion rows every `span` frames, events every ~30."""
    times = [float(np.float32(i / FPS)) for i in range(frames)]
    starts = list(range(0, frames, span))
    names = [
        f"subtask {k}: move the {rng.choice(['cup', 'plate', 'fork'])} {rng.choice(['left', 'right'])}"
        for k in range(len(starts))
    ]
    persistent = [_row("task_aug", f"tidy the table, variant {k}", 0.0, role="user") for k in range(4)]
    for k, start in enumerate(starts):
        ts = times[start]
        remaining = "\n".join(f"{i + 1}. {n}" for i, n in enumerate(names[k : k + 6]))
        for style, text in (("subtask", names[k]), ("plan", remaining), ("memory", f"done {k} of {len(starts)}")):
            persistent.append(_row(style, text, ts))
        persistent.append(_row("motion", f"motion {k}", times[min(start + span // 2, frames - 1)]))
    persistent.sort(key=lambda r: (r["timestamp"], r["style"] or "", r["role"] or ""))
    events: list[list[Row]] = [[] for _ in range(frames)]
    say = [{"type": "function", "function": {"name": "say", "arguments": {"text": "Okay."}}}]
    for n, i in enumerate(range(15, frames, 30)):
        i = min(frames - 1, i + rng.randint(-3, 3))
        if n % 2:
            events[i] = [_row("interjection", "wait, skip that", role="user"), _row(None, None, tool_calls=say)]
        else:
            for cam in CAMERAS:
                events[i] += [_row("vqa", f"how many cups ({cam})?", role="user", camera=cam),
                              _row("vqa", '{"count": 2}', camera=cam)]
    return persistent, events, times


# --- the plain-scan renderer (reference semantics) ---------------------------------------------------


def _h(key: str) -> int:
    return int.from_bytes(blake2b(key.encode(), digest_size=8).digest(), "big")


def _select_one(rows: list[Row]) -> Row | None:
    if len(rows) > 1:
        raise ValueError("ambiguous")
    return rows[0] if rows else None


def _match(row: Row, call: ResolverCall) -> bool:
    return (
        (call.style is None or row.get("style") == call.style)
        and (call.role is None or row.get("role") == call.role)
        and (call.camera is None or row.get("camera") == call.camera)
        and (
            call.tool_name is None
            or any(
                isinstance(c, dict) and c.get("function", {}).get("name") == call.tool_name
                for c in row.get("tool_calls") or []
            )
        )
    )


def scan_resolve(call: ResolverCall, persistent: list[Row], events: list[Row], t: float) -> Row | None:
    if call.resolver == "emitted_at":
        if call.is_persistent:
            return _select_one([r for r in persistent if _match(r, call) and abs(r["timestamp"] - t) <= 0.1])
        return _select_one([r for r in events if _match(r, call)])
    rows = [r for r in persistent if _match(r, call)]
    if call.resolver == "active_at":
        before = [r for r in rows if r["timestamp"] <= t]
        if not before:
            return None
        latest = max(r["timestamp"] for r in before)
        return _select_one([r for r in before if r["timestamp"] == latest])
    rows.sort(key=lambda r: (r["timestamp"], r["style"] or "", r["role"] or ""))
    anchor = max((i for i, r in enumerate(rows) if r["timestamp"] <= t), default=None)
    offset = call.offset if call.resolver == "nth_next" else -call.offset
    target = (offset - 1 if offset > 0 else -1) if anchor is None else anchor + offset
    return rows[target] if 0 <= target < len(rows) else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return (value.get("content") or "") if isinstance(value, dict) else str(value)


def _scan_component(
    recipe: Recipe, persistent: list[Row], events: list[Row], t: float, idx: int, task: str
) -> dict[str, Any] | None:
    rephrasings = [r for r in persistent if r.get("style") == "task_aug" and r.get("role") == "user"]
    values: dict[str, Any] = {
        "task": task
        if task is not None
        else (rephrasings[_h(f"task_aug:{idx}") % len(rephrasings)]["content"] if rephrasings else None)
    }
    for name in recipe.referenced_binding_names() | set(recipe.bindings):
        if name != "task":
            values[name] = scan_resolve(recipe.binding(name), persistent, events, t)

    def sub(s: str) -> str:
        return PLACEHOLDER_RE.sub(lambda m: _text(values[m.group(1)]), s)

    messages, streams, targets = [], [], []
    for turn in recipe.messages or ():
        if turn.if_present and values.get(turn.if_present) is None:
            continue
        msg: dict[str, Any] = {"role": turn.role}
        if isinstance(turn.content, str):
            msg["content"] = sub(turn.content)
        elif turn.content is not None:
            msg["content"] = [
                {k: sub(v) if isinstance(v, str) else v for k, v in copy.deepcopy(b).items()}
                for b in turn.content
            ]
        src = values.get(turn.tool_calls_from) if turn.tool_calls_from else None
        if isinstance(src, dict) and src.get("tool_calls"):
            msg["tool_calls"] = copy.deepcopy(src["tool_calls"])
        if turn.target:
            targets.append(len(messages))
        messages.append(msg)
        streams.append(turn.stream)
    if not targets and "low_level" not in streams:
        return None
    return {"messages": messages, "message_streams": streams, "target_message_indices": targets}


def _pick(weighted: list[tuple[float, Any]], key: str) -> Any:
    draw = _h(key) / 2**64 * sum(w for w, _ in weighted)
    cumulative = 0.0
    for weight, item in weighted:
        cumulative += weight
        if draw < cumulative:
            return item
    return weighted[-1][1]


def scan_render(
    recipe: Recipe, persistent: list[Row], events: list[Row], t: float, idx: int, task: str
) -> dict[str, Any] | None:
    if recipe.blend is None:
        return _scan_component(recipe, persistent, events, t, idx, task)
    hits = [
        (c.weight or 0.0, out)
        for _, c in recipe.components()
        if c.route == "vqa" and (out := _scan_component(c, persistent, events, t, idx, task)) is not None
    ]
    if hits:
        return hits[0][1] if len(hits) == 1 else _pick(hits, f"vqa:{idx}")
    component = _pick([(c.weight or 0.0, c) for c in recipe.blend.values()], str(idx))
    return _scan_component(component, persistent, events, t, idx, task)


# --- the run -----------------------------------------------------------------------------------------


def best_of(repeat: int, run: Callable[..., tuple[float, list[Any]]], *args: Any) -> tuple[float, list[Any]]:
    """Best CPU time of `repeat` runs (other processes on a shared machine inflate wall time)."""
    runs = [run(*args) for _ in range(repeat)]
    return min(seconds for seconds, _ in runs), runs[0][1]


def run_ours(recipe: Recipe, episodes: list[Episode], options: RenderOptions) -> tuple[float, list[Any]]:
    out: list[Any] = []
    start = time.process_time()
    base = 0
    for persistent, events, times in episodes:
        timeline = EpisodeTimeline(persistent, fps=FPS)
        for i, t in enumerate(times):
            out.append(render_sample(recipe, timeline, t=t, frame_events=events[i], sample_idx=base + i,
                                     task="tidy the table", options=options))
        base += len(times)
    return time.process_time() - start, out


def run_scan(recipe: Recipe, episodes: list[Episode]) -> tuple[float, list[Any]]:
    out: list[Any] = []
    start = time.process_time()
    base = 0
    for persistent, events, times in episodes:
        for i, t in enumerate(times):
            out.append(scan_render(recipe, persistent, events[i], t, base + i, "tidy the table"))
        base += len(times)
    return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--frames", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=2, help="runs per renderer; the best CPU time counts")
    parser.add_argument(
        "--span", type=int, default=40, help="frames per subtask (sets the persistent row count)"
    )
    parser.add_argument("--process_runs", type=int, default=5, help="timed runs of the command (median)")
    parser.add_argument("--process_episodes", type=int, default=43, help="episodes of the dataset the command reads")
    parser.add_argument("--process_frames", type=int, default=400, help="frames per episode of that dataset")
    parser.add_argument("--dataset", default=None, help="time the command on this dataset instead")
    parser.add_argument("--lerobot_python", default=None,
                        help="a Python with lerobot 0.6.x: also time LeRobot's render_sample on that dataset")
    args = parser.parse_args()
    rng = random.Random(0)
    episodes = [make_episode(rng, args.frames, args.span) for _ in range(args.episodes)]
    n = sum(len(e[2]) for e in episodes)
    rows = len(episodes[0][0])
    print(
        f"{args.episodes} episodes x {args.frames} frames, {rows} persistent rows per episode, "
        f"{sum(1 for e in episodes for ev in e[1] if ev)} event frames"
    )
    print(f"{'recipe':<24} {'renderer':<28} {'samples/s':>11} {'vs scan':>8} {'identical':>10}")
    ratios: list[float] = []
    ours_rates: list[float] = []
    scan_rates: list[float] = []
    all_same = True
    for name in ("subtask_mem_vqa_speech", "hirobot"):
        recipe = load_recipe(name)
        scan_s, expected = best_of(args.repeat, run_scan, recipe, episodes)
        lerobot_s, got = best_of(args.repeat, run_ours, recipe, episodes, RenderOptions(compat="lerobot"))
        default_s, _ = best_of(args.repeat, run_ours, recipe, episodes, RenderOptions())
        same = all((g.to_dict() if g is not None else None) == e for g, e in zip(got, expected, strict=True))
        all_same &= same
        ratios.append(scan_s / lerobot_s)
        ours_rates.append(n / lerobot_s)
        scan_rates.append(n / scan_s)
        print(f"{name:<24} {'plain scan (reference)':<28} {n / scan_s:>11,.0f} {1.0:>7.1f}x {'-':>10}")
        print(
            f"{'':<24} {'timeline, compat=lerobot':<28} {n / lerobot_s:>11,.0f} {scan_s / lerobot_s:>7.1f}x "
            f"{str(same).lower():>10}"
        )
        print(
            f"{'':<24} {'timeline, steerable default':<28} {n / default_s:>11,.0f} {scan_s / default_s:>7.1f}x "
            f"{'n/a':>10}"
        )
    with tempfile.TemporaryDirectory(prefix="render-bench-") as tmp:
        root = Path(args.dataset) if args.dataset else write_dataset(Path(tmp) / "ds", rng, args)
        frames, wall, cpu, memory_s = time_process(root, args.process_runs)
        lr = compare_lerobot(root, Path(tmp), args.lerobot_python, args.process_runs) if args.lerobot_python else None
    print(
        f"{'subtask_mem_vqa_speech':<24} {'in memory (render only)':<28} {frames / memory_s:>11,.0f} "
        f"{'':>8} {frames:>10,} frames"
    )
    print(
        f"{'':<24} {'steerable render process':<28} {frames / wall:>11,.0f} {'':>8} "
        f"{wall:>9.2f}s wall, {cpu:.2f}s CPU (median of {args.process_runs})"
    )
    extra = ""
    if lr is None:
        print("LeRobot comparison skipped: pass --lerobot_python PATH (a Python with lerobot 0.6.x)")
    else:
        print(
            f"{'':<24} {'LeRobot render_sample process':<28} {frames / lr['lerobot_process_s']:>11,.0f} {'':>8} "
            f"{lr['lerobot_process_s']:>9.2f}s wall, {lr['lerobot_process_cpu_s']:.2f}s CPU; vs steerable "
            f"--compat lerobot {lr['ours_process_s']:.2f}s: {lr['lerobot_ratio']:.1f}x wall, "
            f"{lr['lerobot_cpu_ratio']:.1f}x CPU (pair medians), {lr['lerobot_samples']:,} samples, "
            f"identical={str(lr['lerobot_identical']).lower()}"
        )
        extra = " " + " ".join(
            f"{k}={str(v).lower() if isinstance(v, bool) else round(v, 2)}" for k, v in lr.items()
        )
    print(
        f"RESULT samples_per_s={min(ours_rates):.0f} scan_samples_per_s={min(scan_rates):.0f} "
        f"speedup_min={min(ratios):.1f} identical={str(all_same).lower()} persistent_rows={rows} frames={n} "
        f"process_s={wall:.2f} process_cpu_s={cpu:.2f} process_samples_per_s={frames / wall:.0f} "
        f"inmemory_samples_per_s={frames / memory_s:.0f} process_frames={frames}{extra}"
    )


# --- process to process ------------------------------------------------------------------------------


def write_dataset(root: Path, rng: random.Random, args: argparse.Namespace) -> Path:
    """A LeRobot dataset on disk with `make_episode`'s language (tiny videos for the two cameras)."""
    from steerable.dataset import open_dataset
    from steerable.dataset.build import DatasetBuilder
    from steerable.dataset.writer import EpisodeLanguage, write_language

    features: dict[str, dict[str, Any]] = {"observation.state": {"dtype": "float32", "shape": [2], "names": None}}
    features |= {cam: {"dtype": "video", "shape": [32, 32, 3], "names": None} for cam in CAMERAS}
    n = args.process_frames
    pixels = np.zeros((32, 32, 3), dtype=np.uint8)
    episodes = [make_episode(rng, n, args.span) for _ in range(args.process_episodes)]
    with DatasetBuilder(root, fps=FPS, features=features, robot_type=None) as builder:
        for _ in episodes:
            builder.add_episode("tidy the table", {"observation.state": np.zeros((n, 2))},
                                {cam: [pixels] * n for cam in CAMERAS})
    updates = {
        e: EpisodeLanguage(persistent, [(times[i], r) for i, rows in enumerate(events) for r in rows])
        for e, (persistent, events, times) in enumerate(episodes)
    }
    write_language(open_dataset(root), updates)
    return root


def time_process(root: Path, runs: int) -> tuple[int, float, float, float]:
    """(frames, median wall s, median CPU s) of `steerable render --all --json`, and the in-memory time."""
    from steerable.dataset import open_dataset
    from steerable.train.samples import DatasetRenderer

    command = [sys.executable, "-m", "steerable.cli.main", "render", str(root), "--recipe",
               "subtask_mem_vqa_speech", "--all", "--json"]
    walls, cpus = [], []
    for i in range(runs + 1):  # the first run warms the page cache and is not counted
        before = _children_cpu()
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        if i:
            walls.append(time.perf_counter() - start)
            cpus.append(_children_cpu() - before)
    ds = open_dataset(root)
    renderer = DatasetRenderer(ds, load_recipe("subtask_mem_vqa_speech"))
    loaded = [renderer.timeline(e.episode_index) for e in ds.episodes]
    frames = [(timeline, int(i), float(t)) for timeline, table in loaded
              for i, t in zip(table.column("index").to_pylist(), table.column("timestamp").to_pylist(), strict=True)]
    start = time.process_time()
    for timeline, index, t in frames:
        renderer.render(timeline, t=t, index=index, task="tidy the table")
    return len(frames), statistics.median(walls), statistics.median(cpus), time.process_time() - start


def compare_lerobot(root: Path, tmp: Path, python: str, runs: int) -> dict[str, Any]:
    """`steerable render --compat lerobot` vs LeRobot's `render_sample` (the driver, in `python`), one recipe.

    Both render every frame to JSON lines; the samples are compared frame by frame (these runs also warm
    the caches), then the two commands run in turn `runs` times; ratios are LeRobot / steerable, pair by
    pair, median.
    """
    recipe = tmp / "subtask_mem_vqa_speech_lerobot061.yaml"
    recipe.write_text(LEROBOT_061_RECIPE)
    ours = [sys.executable, "-m", "steerable.cli.main", "render", str(root), "--recipe", str(recipe),
            "--compat", "lerobot", "--all", "--json"]
    theirs = [python, str(Path(__file__).with_name("lerobot_render_driver.py")), str(root), str(recipe), "--json"]
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp / "hf-datasets")}  # from_parquet's cache, removed with tmp

    def samples(command: list[str]) -> dict[int, list[Any]]:
        out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        keys = ("messages", "message_streams", "target_message_indices")
        return {r["index"]: [r.get(k) for k in keys] for r in rows if "index" in r}

    got, expected = samples(ours), samples(theirs)
    walls: dict[str, list[float]] = {"ours": [], "theirs": []}
    cpus: dict[str, list[float]] = {"ours": [], "theirs": []}
    for _ in range(runs):
        for key, command in (("ours", ours), ("theirs", theirs)):
            before = _children_cpu()
            start = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
            walls[key].append(time.perf_counter() - start)
            cpus[key].append(_children_cpu() - before)
    return {
        "lerobot_process_s": statistics.median(walls["theirs"]),
        "lerobot_process_cpu_s": statistics.median(cpus["theirs"]),
        "ours_process_s": statistics.median(walls["ours"]),
        "lerobot_ratio": statistics.median(t / o for t, o in zip(walls["theirs"], walls["ours"], strict=True)),
        "lerobot_cpu_ratio": statistics.median(t / o for t, o in zip(cpus["theirs"], cpus["ours"], strict=True)),
        "lerobot_samples": sum(v[0] is not None for v in expected.values()),
        "lerobot_identical": got == expected,
    }


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
