"""`steerable view DATASET`: browse a dataset's annotations over its video (`--edit`: correct them), or
export a static site."""

from __future__ import annotations

import argparse
from typing import ClassVar

from pydantic import Field

from steerable.cli.options import Episodes, dataset_field, episodes_field
from steerable.errors import ConfigError
from steerable.settings import Settings

__all__ = ["ViewSettings", "register"]

USAGE = """usage: steerable view DATASET [--edit] [--against DATASET ...] [--export DIR | --rerun [FILE.rrd]] [...]

A local web viewer: annotations over the video, tracks, recipe samples (--edit: correct them; --export: a
static site; --rerun: log to Rerun). Every option, with its default:
"""


class ViewSettings(Settings):
    """`steerable view`: which dataset, and how to show it."""

    positional: ClassVar[tuple[str, ...]] = ("dataset",)
    doc: ClassVar[str | None] = "docs/view.md"

    dataset: str = dataset_field("local dataset root, or a Hub repo id (downloaded first)")
    host: str = Field("127.0.0.1", description="address to bind (default 127.0.0.1: this machine only)")
    port: int = Field(8000, description="port to listen on (0: any free port)")
    edit: bool = Field(
        False, description="review and correct the annotations: saves are revisions (`steerable revisions`); the "
        "printed URL carries this session's token")
    against: list[str] = Field(
        [], json_schema_extra={"repeat": True},
        description="DATASET: another annotation of the same episodes (model, prompt, run): its disagreement ranks "
        "the episodes to review first")
    export: str | None = Field(None, description="DIR: write a static site to DIR (open DIR/index.html) and exit")
    episodes: Episodes = episodes_field("only these episodes, e.g. 0,3,7 or 0-9")
    rerun: str | None = Field(
        None, json_schema_extra={"bare": ""},
        description="FILE.rrd: log the episodes (default: the first) to Rerun instead: write FILE.rrd, connect to a "
        "viewer URL (rerun+http://HOST:9876/proxy), or with no value spawn a viewer (needs the [rerun] extra)")
    revision: str | None = Field(None, description="Hub revision (default: the v3.0 tag)")


def register(sub: argparse._SubParsersAction) -> None:
    from steerable.cli.flags import add_command

    add_command(sub, "view", func=run,
                help="local web viewer: annotations over the video, tracks, recipe samples (or --export a static site)")


def run(args: argparse.Namespace) -> int:
    from steerable.cli.flags import parse_command

    cfg = parse_command(ViewSettings, args, USAGE)
    if cfg is None:
        return 0
    if not 0 <= cfg.port <= 65535:
        raise ConfigError(f"--port must be 0..65535, got {cfg.port}")
    if cfg.edit and (cfg.export or cfg.rerun is not None):
        raise ConfigError("--edit serves the editor; --export and --rerun write read-only copies: choose one")
    if cfg.rerun is not None:
        return _rerun(cfg, cfg.episodes)
    # SIGTERM stops the viewer as Ctrl-C does (the CLI's handler): clips stop, temp folders and
    # half-built exports are removed.
    return _export(cfg, cfg.episodes) if cfg.export else _serve(cfg, cfg.episodes)


def _export(args: ViewSettings, episodes: list[int] | None) -> int:
    from steerable.dataset import open_dataset
    from steerable.progress import ProgressLine
    from steerable.viewer import export_site

    ds = open_dataset(args.dataset, revision=args.revision)
    total = len(set(episodes)) if episodes is not None else len(ds.episodes)
    with ProgressLine("view --export", total) as line:
        index = export_site(ds, str(args.export), episodes, progress=line.advance)
    print(f"static viewer written: {index}")
    return 0


def _serve(args: ViewSettings, episodes: list[int] | None) -> int:
    from steerable.dataset import open_dataset
    from steerable.viewer import ViewerData, make_server

    ds = open_dataset(args.dataset, revision=args.revision)
    server = make_server(ViewerData(ds, episodes=episodes, against=args.against), args.host, args.port, edit=args.edit)
    server.warm()
    mode = " (editing: saves are revisions)" if args.edit else ""
    print(f"steerable view: {ds.root} at {server.url}{mode} (Ctrl-C to stop)", flush=True)
    try:
        thread = server.start()  # on a thread: Ctrl-C (and SIGTERM, which acts as it) reaches this one
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.shutdown()
        server.server_close()
    return 0


def _rerun(args: ViewSettings, episodes: list[int] | None) -> int:
    from steerable.dataset import open_dataset
    from steerable.viewer.rerun import import_rerun, log_dataset, parse_target

    if args.export:
        raise ConfigError("--rerun and --export are two different outputs: choose one")
    target = parse_target(args.rerun)
    import_rerun()  # a missing extra fails before the dataset is opened or downloaded
    ds = open_dataset(args.dataset, revision=args.revision)
    if episodes is None:
        episodes = [ds.episodes[0].episode_index] if ds.episodes else []
        print(f"logging episode {episodes[0] if episodes else '-'} (choose others with --episodes 0,3,7-9)")
    for log in log_dataset(ds, episodes, target):
        videos = ", ".join(f"{key} ({how})" for key, how in log.cameras.items()) or "no cameras"
        print(f"episode {log.episode_index}: {log.frames} frames, {videos}, {log.language_rows} language rows")
    if target.kind == "file":
        print(f"rerun recording written: {target.where} (open it with `rerun {target.where}`)")
    else:
        print(f"sent to the Rerun viewer{' at ' + target.where if target.where else ''}")
    return 0
