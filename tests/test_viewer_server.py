"""`steerable view` server: JSON API, byte ranges, confinement to the dataset root, CLI errors."""

from __future__ import annotations

import http.client
import json
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import av
import pytest

from steerable.dataset import LeRobotDataset
from steerable.viewer import ViewerData, make_server
from steerable.viewer.files import parse_range
from viewer_data import (
    SAY_FRAME,
    TOP,
    TOP_BOX,
    VQA_FRAME,
    WRIST,
    WRIST_POINT,
    start_view,
    steerable,
)


@pytest.fixture(scope="module")
def server(viewer_ds: Path) -> Iterator[tuple[str, int]]:
    proc, url = start_view(str(viewer_ds))
    host, port = url[len("http://") :].rstrip("/").rsplit(":", 1)
    yield host, int(port)
    proc.terminate()
    proc.wait(timeout=10)


def request(
    server: tuple[str, int], path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A raw HTTP request; the path is sent exactly as given (no client-side normalising)."""
    conn = http.client.HTTPConnection(*server, timeout=30)
    conn.putrequest(method, path, skip_accept_encoding=True)
    for key, value in (headers or {}).items():
        conn.putheader(key, value)
    conn.endheaders()
    reply = conn.getresponse()
    body = reply.read()
    conn.close()
    return reply.status, {k.lower(): v for k, v in reply.getheaders()}, body


def get_json(server: tuple[str, int], path: str) -> dict:
    status, _, body = request(server, path)
    assert status == 200, body
    return json.loads(body)


def test_binds_localhost_and_serves_the_app(server: tuple[str, int]) -> None:
    assert server[0] == "127.0.0.1"
    status, headers, body = request(server, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    page = body.decode()
    assert 'src="assets/app.js"' in page
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page  # nothing remote
    status, _, js = request(server, "/assets/app.js")
    assert status == 200 and b"steerableView" in js


def test_episode_list_counts_rows_per_style(server: tuple[str, int]) -> None:
    data = get_json(server, "/api/dataset")
    assert data["cameras"] == [TOP, WRIST]
    assert len(data["episodes"]) == 3
    for ep in data["episodes"]:
        assert ep["task"] and ep["length"] > 0
        counts = ep["counts"]
        assert counts["subtask"] >= 1 and counts["motion"] >= 1
        assert counts["vqa"] == 2 and counts["interjection"] == 1 and counts["speech"] == 1


def test_episode_payload_has_tracks_overlays_and_plot(server: tuple[str, int]) -> None:
    ep = get_json(server, "/api/episodes/1")
    tracks = {t["style"]: t for t in ep["tracks"]}
    assert list(tracks)[:4] == ["subtask", "plan", "memory", "motion"]
    spans = tracks["subtask"]["items"]
    assert spans[0]["start"] == 0.0 and spans[-1]["end"] == pytest.approx(ep["duration"])
    assert all(a["end"] == b["start"] for a, b in zip(spans, spans[1:], strict=False))  # gap-free cover
    (say,) = tracks["speech"]["items"]
    assert say["text"] == "Okay, switching to the other bin."
    assert say["t"] == pytest.approx(SAY_FRAME / ep["fps"], abs=1e-4)
    overlays = {v["camera"]: v for v in ep["vqa"]}
    assert overlays[TOP]["shapes"] == [{"type": "box", "bbox": TOP_BOX, "label": "cube"}]
    assert overlays[WRIST]["shapes"] == [{"type": "point", "point": WRIST_POINT, "label": "gripper tip"}]
    assert overlays[TOP]["frame"] == VQA_FRAME
    series = {s["key"]: s for s in ep["plot"]["series"]}
    state = series["observation.state"]
    assert state["names"][state["gripper"][0]] == "gripper.closure"
    assert {k["kind"] for k in ep["plot"]["keystates"]} >= {"gripper_close", "gripper_open"}
    cameras = {c["key"]: c for c in ep["cameras"]}
    assert cameras[TOP]["url"].startswith("files/videos/") and cameras[TOP]["offset"] > 0  # 2nd episode in the file


def test_recipe_panel_gives_the_samples_of_steerable_render(server: tuple[str, int], viewer_ds: Path) -> None:
    got = get_json(server, "/api/render?recipe=subtask_mem&episode=1&frame=30")
    cli = steerable("render", str(viewer_ds), "--recipe", "subtask_mem", "--episode", "1", "--frame", "30", "--json")
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout.splitlines()[0])
    for key in ("messages", "message_streams", "target_message_indices", "index"):
        assert got[key] == expected[key]
    status, _, _ = request(server, "/api/render?recipe=no_such_recipe&episode=1&frame=30")
    assert status == 404


def test_video_byte_ranges(server: tuple[str, int], viewer_ds: Path) -> None:
    rel = "videos/observation.images.top/chunk-000/file-000.mp4"
    data = (viewer_ds / rel).read_bytes()
    status, headers, body = request(server, "/files/" + rel, headers={"Range": "bytes=100-1123"})
    assert status == 206 and body == data[100:1124]
    assert headers["content-range"] == f"bytes 100-1123/{len(data)}"
    assert headers["content-type"] == "video/mp4"
    status, headers, body = request(server, "/files/" + rel, headers={"Range": "bytes=-10"})
    assert status == 206 and body == data[-10:]
    status, headers, body = request(server, "/files/" + rel)
    assert status == 200 and body == data and headers["accept-ranges"] == "bytes"
    status, headers, _ = request(server, "/files/" + rel, headers={"Range": f"bytes={len(data)}-"})
    assert status == 416 and headers["content-range"] == f"bytes */{len(data)}"
    status, headers, body = request(server, "/files/" + rel, method="HEAD")
    assert status == 200 and body == b"" and headers["content-length"] == str(len(data))


def test_large_file_ranges_are_streamed(server: tuple[str, int], viewer_ds: Path) -> None:
    big = viewer_ds / "videos" / "big.mp4"
    size = 5 * 1024**3  # sparse: takes no disk space
    with big.open("wb") as f:
        f.truncate(size)
        f.seek(size - 4)
        f.write(b"tail")
    try:
        status, headers, body = request(server, "/files/videos/big.mp4", headers={"Range": f"bytes={size - 8}-"})
        assert status == 206 and body == b"\0\0\0\0tail"
        assert headers["content-range"] == f"bytes {size - 8}-{size - 1}/{size}"
    finally:
        big.unlink()


@pytest.mark.parametrize(
    "path",
    [
        "/files/../meta/info.json",
        "/files/meta/../../etc/passwd",
        "/files/%2e%2e/%2e%2e/etc/passwd",
        "/files/%2E%2E%2Fmeta%2Finfo.json",
        "/files//etc/passwd",
        "/files/%2Fetc%2Fpasswd",
        "/files/meta/..%5c..%5cetc%5cpasswd",
        "/files/meta/info.json%00.mp4",
        "/files/meta",
        "/../../etc/passwd",
        "/assets/../server.py",
        "/files/meta/outside_link",
    ],
)
def test_traversal_and_escapes_get_404(server: tuple[str, int], viewer_ds: Path, tmp_path: Path, path: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the dataset")
    link = viewer_ds / "meta" / "outside_link"
    if not link.is_symlink():
        os.symlink(secret, link)
    status, _, body = request(server, path)
    assert status == 404
    assert b"outside the dataset" not in body and b"root:" not in body


def test_ten_replies_come_back_in_order_on_one_kept_alive_connection(viewer_ds: Path) -> None:
    """Replies go out on the connection they were asked on, which stays open (the client keeps one
    socket), each whole. How fast (with Nagle's algorithm a reply written as headers then body waited
    for the client's delayed ACK: 40 ms each) is measured in benchmarks/latency.py."""
    server = make_server(ViewerData(LeRobotDataset(viewer_ds)), "127.0.0.1", 0)
    server.start()
    try:
        conn = http.client.HTTPConnection(*server.server_address, timeout=30)
        conn.request("GET", "/assets/style.css")
        first = conn.getresponse().read()
        sock = conn.sock
        paths = ["/assets/style.css", "/api/dataset", "/assets/style.css"] * 3 + ["/files/meta/info.json"]
        bodies = []
        for path in paths:
            conn.request("GET", path)
            reply = conn.getresponse()
            assert reply.status == 200 and not reply.will_close
            bodies.append(reply.read())
            assert conn.sock is sock  # the same connection: never closed and reopened
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    assert first and bodies[0] == bodies[3] == first and json.loads(bodies[1]) == json.loads(bodies[4])
    assert bodies[-1] == (viewer_ds / "meta" / "info.json").read_bytes()


def test_read_only(server: tuple[str, int]) -> None:
    for method in ("POST", "PUT", "DELETE"):
        status, headers, _ = request(server, "/files/meta/info.json", method=method)
        assert status == 405 and headers["allow"] == "GET, HEAD"


def test_parse_range_cases() -> None:
    assert parse_range(None, 100) is None
    assert parse_range("bytes=0-", 100) == (0, 99)
    assert parse_range("bytes=10-2000", 100) == (10, 99)
    assert parse_range("bytes=-5", 100) == (95, 99)
    assert parse_range("bytes=0-1,5-6", 100) is None  # several ranges: the whole file
    assert parse_range("bytes=100-", 100) is False
    assert parse_range("bytes=5-4", 100) is None  # invalid: ignored, the whole file


def test_cli_errors_are_one_line(viewer_ds: Path, tmp_path: Path) -> None:
    missing = steerable("view", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = steerable("view", str(viewer_ds), "--port", str(port))
    assert taken.returncode == 2 and taken.stderr.count("\n") == 1 and "in use" in taken.stderr
    bad = steerable("view", str(viewer_ds), "--episodes", "1,x")
    assert bad.returncode == 2 and "--episodes" in bad.stderr
    unknown = steerable("view", str(viewer_ds), "--episodes", "7")
    assert unknown.returncode == 2 and "7" in unknown.stderr


def test_mpeg4_video_is_served_as_a_playable_clip(lingzu: Path, tmp_path: Path) -> None:
    proc, url = start_view(str(lingzu), "--episodes", "3")
    try:
        host, port = url[len("http://") :].rstrip("/").rsplit(":", 1)
        srv = (host, int(port))
        ep = get_json(srv, "/api/episodes/3")
        (camera,) = ep["cameras"]
        assert camera["url"] == "clips/3/image.mp4" and camera["offset"] == 0.0  # MPEG-4 part 2: re-encoded
        status, headers, body = request(srv, "/" + camera["url"], headers={"Range": "bytes=0-"})
        assert status == 206 and body[4:8] == b"ftyp"
        clip = tmp_path / "clip.mp4"
        clip.write_bytes(body)
        with av.open(str(clip)) as c:
            stream = c.streams.video[0]
            assert stream.codec_context.name == "h264"
            assert sum(1 for _ in c.decode(stream)) == ep["length"]
        status, _, _ = request(srv, "/api/episodes/0")  # not among --episodes
        assert status == 400
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def reset(conn: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a browser drops a video range request it no longer needs."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def test_connection_resets_print_no_traceback(viewer_ds: Path) -> None:
    proc, url = start_view(str(viewer_ds))
    host, port = url[len("http://") :].rstrip("/").rsplit(":", 1)
    srv = (host, int(port))
    rel = "/files/videos/observation.images.top/chunk-000/file-000.mp4"
    try:
        half = socket.create_connection(srv)  # a request cut off mid-headers
        half.sendall(b"GET " + rel.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        reset(half)
        idle = socket.create_connection(srv)  # a kept-alive connection reset after its reply
        idle.sendall(f"GET {rel} HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=0-99\r\n\r\n".encode())
        assert idle.recv(12).startswith(b"HTTP/1.1 206")
        reset(idle)
        assert request(srv, "/api/dataset")[0] == 200  # still serving
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err and "ConnectionResetError" not in err, err


def test_other_request_errors_are_still_logged(viewer_ds: Path, caplog: pytest.LogCaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    server = make_server(ViewerData(LeRobotDataset(viewer_ds)), "127.0.0.1", 0)

    def broken(self: object) -> None:
        raise RuntimeError("a bug in a handler")

    monkeypatch.setattr("steerable.viewer.site.ViewerData.summary", broken)
    server.start()
    try:
        with caplog.at_level(logging.ERROR, logger="steerable.viewer.server"):
            status, _, body = request(server.server_address, "/api/dataset")
            assert request(server.server_address, "/assets/app.js")[0] == 200  # still serving
    finally:
        server.shutdown()
        server.server_close()
    assert status == 500 and b"a bug" not in body  # the traceback goes to the log, not to the client
    assert any(r.exc_info and "a bug in a handler" in str(r.exc_info[1]) for r in caplog.records)


def test_sigterm_stops_the_server_and_removes_its_clips(lingzu: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable.cli.main", "view", str(lingzu), "--episodes", "3", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().split(" at ")[1].split()[0]
    host, port = url[len("http://") :].rstrip("/").rsplit(":", 1)
    status, _, body = request((host, int(port)), "/clips/3/image.mp4", headers={"Range": "bytes=0-99"})
    assert status == 206 and body[4:8] == b"ftyp"
    assert [p.name.startswith("steerable-view-") for p in tmp_path.iterdir()] == [True]
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # the re-encoded clips went with the server
