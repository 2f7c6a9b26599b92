"""A folder commit keeps symbolic links as they are: every writer, a linked `videos/` folder and a linked file.

The layout of each test: `tmp/ds` is the dataset, `tmp/shared` holds what its links point to
(`ds/videos -> ../shared/videos`, `ds/meta/stats.json -> ../../shared/stats.json`), as when copies of
a dataset share their large video folder. After any write the links are there with byte-identical
text, `shared/` is unchanged (bytes and modes), and every entry of the dataset keeps its kind and mode.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from annotate_helpers import make_synthetic, steerable
from steerable.control import Observation
from steerable.dataset import LeRobotDataset
from steerable.dataset.commit import FolderCommit, commit_folder
from steerable.dataset.review import episode_rows, save_episode
from steerable.dataset.revisions import checkout
from steerable.runtime.loop import RuntimeEvent
from steerable.runtime.recording import Recorder

VIDEOS_LINK = b"../shared/videos"
STATS_LINK = b"../../shared/stats.json"


def tree(top: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under `top`: (kind, mode or link text[, sha256]), links never followed."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            rel = path.relative_to(top).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(os.fsencode(path)))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def shape(top: Path) -> dict[str, tuple[object, ...]]:
    """`tree` without the bytes of files (a write rewrites some) and without the work folder."""
    return {rel: entry[:2] for rel, entry in tree(top).items() if not rel.startswith(".steerable")}


def link_up(src: Path, tmp: Path) -> Path:
    """A copy of dataset `src` at tmp/ds whose videos folder and stats.json are links into tmp/shared."""
    ds, shared = tmp / "ds", tmp / "shared"
    shutil.copytree(src, ds, symlinks=True)
    shared.mkdir()
    shutil.move(ds / "videos", shared / "videos")
    shutil.move(ds / "meta/stats.json", shared / "stats.json")
    os.symlink(VIDEOS_LINK, ds / "videos")
    os.symlink(STATS_LINK, ds / "meta/stats.json")
    for path in sorted(ds.glob("data/*/*.parquet")):
        path.chmod(0o640)  # modes a write must keep, rewritten or not
    (ds / "meta/tasks.parquet").chmod(0o600)
    (ds / "meta").chmod(0o750)
    for path in (shared / "videos").rglob("*"):
        path.chmod(0o555 if path.is_dir() else 0o444)
    (shared / "stats.json").chmod(0o604)
    return ds


def assert_kept(ds: Path, before_ds: dict[str, tuple[object, ...]], before_shared: dict[str, tuple[object, ...]]
                ) -> None:
    assert os.path.islink(ds / "videos") and os.readlink(os.fsencode(ds / "videos")) == VIDEOS_LINK
    assert os.path.islink(ds / "meta/stats.json") and os.readlink(os.fsencode(ds / "meta/stats.json")) == STATS_LINK
    assert tree(ds.parent / "shared") == before_shared, "the links' targets are untouched"
    after = shape(ds)
    assert {rel: after.get(rel) for rel in before_ds} == before_ds, "every entry keeps its kind and mode"
    assert LeRobotDataset(ds).video_path(
        LeRobotDataset(ds).camera_keys[0], LeRobotDataset(ds).episodes[0]).is_file()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_synthetic(tmp_path_factory.mktemp("plain") / "ds", episodes=2)


@pytest.fixture(scope="module")
def annotated(plain: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("annotated") / "ds"
    shutil.copytree(plain, root)
    done = steerable("annotate", "--root", str(root), timeout=120)
    assert done.returncode == 0, done.stderr
    return root


def test_annotate_in_place_keeps_the_links(plain: Path, tmp_path: Path) -> None:
    ds = link_up(plain, tmp_path)
    before_ds, before_shared = shape(ds), tree(tmp_path / "shared")
    done = steerable("annotate", "--root", str(ds), timeout=120)
    assert done.returncode == 0, done.stderr
    assert LeRobotDataset(ds).has_language
    assert_kept(ds, before_ds, before_shared)
    info = steerable("info", str(ds))
    assert "have no video file" not in info.stdout + info.stderr


def test_annotate_into_a_copy_links_the_same_videos(plain: Path, tmp_path: Path) -> None:
    ds = link_up(plain, tmp_path)
    out = tmp_path / "elsewhere" / "deeper" / "out"
    done = steerable("annotate", "--root", str(ds), "--output_dir", str(out), timeout=120)
    assert done.returncode == 0, done.stderr
    # A relative link moved to another depth is rewritten to reach the same folder; stats.json is not a
    # video, so the copy gets a file of its own (a tool editing the copy cannot reach the shared one).
    assert os.path.islink(out / "videos") and (out / "videos").resolve() == (tmp_path / "shared/videos").resolve()
    assert not os.path.islink(out / "meta/stats.json")
    assert (out / "meta/stats.json").read_bytes() == (tmp_path / "shared/stats.json").read_bytes()
    assert os.readlink(os.fsencode(ds / "videos")) == VIDEOS_LINK


def test_a_review_save_and_going_back_keep_the_links(annotated: Path, tmp_path: Path) -> None:
    ds_root = link_up(annotated, tmp_path)
    before_ds, before_shared = shape(ds_root), tree(tmp_path / "shared")
    ds = LeRobotDataset(ds_root)
    persistent = [dict(r) for r in episode_rows(ds, 0).persistent]
    persistent[0]["content"] = "a person's words"
    assert save_episode(ds, 0, persistent, None, status="reviewed") is not None
    assert_kept(ds_root, before_ds, before_shared)

    back = steerable("revisions", str(ds_root), "--restore", "0")
    assert back.returncode == 0 and "saved as revision 2" in back.stdout, back.stderr
    assert_kept(ds_root, before_ds, before_shared)
    with checkout(ds_root, 1) as old:  # a read-only copy of a revision (`view DS@r1`) sees the videos too
        assert (old / "videos").resolve() == (tmp_path / "shared/videos").resolve()
        assert (old / "meta/stats.json").read_bytes() == (tmp_path / "shared/stats.json").read_bytes()


def test_a_recording_into_a_linked_folder_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "shared/rec").mkdir(parents=True)
    os.symlink("shared/rec", tmp_path / "rec")
    recorder = Recorder(tmp_path / "rec", fps=10)
    recorder.on_event(RuntimeEvent("task", "pick up the cube", 0, 0.0))
    for _ in range(5):
        recorder.on_frame(Observation(state=np.zeros(3, np.float32)), np.zeros(3, np.float32))
    assert recorder.close() == tmp_path / "rec"
    assert os.readlink(tmp_path / "rec") == "shared/rec"
    assert (tmp_path / "shared/rec/meta/info.json").is_file() and len(LeRobotDataset(tmp_path / "rec").episodes) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec", "shared"]


# -- the commit itself ----------------------------------------------------------------------------------


def small(tmp_path: Path) -> Path:
    """ds/{videos -> ../shared/videos, meta/stats.json -> ../../shared/stats.json, meta/info.json, data/x}."""
    shared = tmp_path / "shared"
    (shared / "videos/cam").mkdir(parents=True)
    (shared / "videos/cam/a.mp4").write_text("video")
    (shared / "stats.json").write_text("{}")
    (shared / "stats.json").chmod(0o640)
    ds = tmp_path / "ds"
    (ds / "meta").mkdir(parents=True)
    (ds / "meta/info.json").write_text("info")
    os.symlink(VIDEOS_LINK, ds / "videos")
    os.symlink(STATS_LINK, ds / "meta/stats.json")
    os.symlink("nowhere", ds / "dangling")
    return ds


def test_untouched_links_stay_links_even_dangling(tmp_path: Path) -> None:
    ds = small(tmp_path)
    before, shared = tree(ds), tree(tmp_path / "shared")
    with commit_folder(ds, base=ds) as tx:
        tx.file("meta/info.json").write_text("new info")
    after = tree(ds)
    assert {k: v for k, v in after.items() if k != "meta/info.json"} == {
        k: v for k, v in before.items() if k != "meta/info.json"}
    assert tree(tmp_path / "shared") == shared


def test_writing_under_a_linked_folder_gives_the_dataset_its_own_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ds = small(tmp_path)
    shared = tree(tmp_path / "shared")
    with caplog.at_level(logging.WARNING, logger="steerable.dataset.commit"), commit_folder(ds, base=ds) as tx:
        tx.file("videos/cam/b.mp4").write_text("new video")
        tx.remove("videos/cam/a.mp4")
    assert tree(tmp_path / "shared") == shared, "nothing written or removed behind the link"
    assert not os.path.islink(ds / "videos") and sorted(os.listdir(ds / "videos/cam")) == ["b.mp4"]
    assert "is a symbolic link (to ../shared/videos)" in caplog.text and "is left as it is" in caplog.text


def test_rewriting_a_linked_file_replaces_the_link_and_keeps_the_mode(tmp_path: Path) -> None:
    ds = small(tmp_path)
    shared = tree(tmp_path / "shared")
    with commit_folder(ds, base=ds) as tx:
        tx.file("meta/stats.json").write_text('{"new": 1}')
    assert not os.path.islink(ds / "meta/stats.json") and (ds / "meta/stats.json").read_text() == '{"new": 1}'
    assert stat.S_IMODE(os.stat(ds / "meta/stats.json").st_mode) == 0o640
    assert tree(tmp_path / "shared") == shared


def test_a_linked_destination_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    (target / "a.txt").write_text("old")
    os.symlink("real", tmp_path / "alias")
    tx = FolderCommit(tmp_path / "alias", base=tmp_path / "alias")
    tx.file("a.txt").write_text("new")
    assert tx.commit() == target
    assert os.readlink(tmp_path / "alias") == "real" and (target / "a.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias", "real"]


def test_a_link_to_what_must_not_be_shared_is_copied(tmp_path: Path) -> None:
    ds = small(tmp_path)
    out = tmp_path / "out"
    with commit_folder(out, base=ds, share=lambda rel: rel.startswith("videos/")):
        pass
    assert os.path.islink(out / "videos") and (out / "videos/cam/a.mp4").read_text() == "video"
    assert not os.path.islink(out / "meta/stats.json") and (out / "meta/stats.json").read_text() == "{}"
    with commit_folder(tmp_path / "own", base=ds, share=lambda rel: False):
        pass
    assert not os.path.islink(tmp_path / "own/videos") and (tmp_path / "own/videos/cam/a.mp4").read_text() == "video"
