"""Headless Chromium and a small PNG reader for the browser tests (a helper module; no tests).

Chromium is Debian's package (``/usr/bin/chromium``), installed by ``scripts/ensure-chromium``,
which ``make test`` runs first. A missing browser fails the test instead of skipping it: a skip
would let the "the report opens in a browser" check vanish from CI without anyone noticing.

The PNG reader is stdlib ``zlib`` + ``struct`` + numpy (already a dependency): enough of the
format (8-bit RGB / RGBA, not interlaced) for Chromium's screenshots, so a test can look at the
pixels without a new image library.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import subprocess
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pytest
from numpy.typing import NDArray

CHROMIUM: Final = Path("/usr/bin/chromium")
TIMEOUT_SECS: Final = 60.0
# Without the background-networking flags Chromium keeps dialling Google services, and on a
# closed network that is a flood of refused connections; --no-sandbox because CI runs as root.
HEADLESS_FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # page console messages (script errors included) go to stderr as "...:CONSOLE:..." lines
    "--enable-logging=stderr",
    "--v=0",
)
PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
_CHANNELS: Final = {2: 3, 6: 4}  # PNG colour type -> channels (RGB, RGBA)


@dataclass(frozen=True)
class BrowserRun:
    returncode: int
    stdout: str
    stderr: str

    def console_messages(self) -> list[str]:
        """The page's console lines (``console.*`` calls, uncaught errors, failed loads)."""
        return [line for line in self.stderr.splitlines() if ":CONSOLE" in line]


def require_chromium() -> Path:
    if not CHROMIUM.is_file() or not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: run scripts/ensure-chromium (make test runs it) to install "
            "Debian's chromium package",
            pytrace=False,
        )
    return CHROMIUM


def run_chromium(profile_dir: Path, args: Sequence[str]) -> BrowserRun:
    """Run headless Chromium once with a fresh profile in ``profile_dir``; fail the test if it
    takes longer than TIMEOUT_SECS or exits non-zero. The browser gets its own process group
    so a hung run is killed with its renderer and GPU children."""
    browser = require_chromium()
    profile_dir.mkdir(parents=True, exist_ok=False)
    command = [str(browser), *HEADLESS_FLAGS, f"--user-data-dir={profile_dir}", *args]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT_SECS)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        stdout, stderr = process.communicate()
        pytest.fail(f"chromium took over {TIMEOUT_SECS:.0f} s: {command}\n{stderr[-4000:]}")
    finally:
        # children outliving the browser process (they should not) are ours to end
        _kill_group(process)
    run = BrowserRun(returncode=process.returncode, stdout=stdout, stderr=stderr)
    if run.returncode != 0:
        pytest.fail(f"chromium exited {run.returncode}: {command}\n{stderr[-4000:]}")
    return run


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


# --- PNG --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PngHeader:
    width: int
    height: int
    bit_depth: int
    colour_type: int
    interlace: int


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG file (bad signature)")
    chunks, at = [], len(PNG_SIGNATURE)
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        chunks.append((kind, data[at + 8 : at + 8 + length]))
        at += 12 + length  # length, type, data, CRC
    return chunks


def read_png_header(data: bytes) -> PngHeader:
    """IHDR, which the format requires to be the first chunk."""
    kind, body = _chunks(data[:33])[0]
    if kind != b"IHDR":
        raise ValueError(f"first PNG chunk is {kind!r}, not IHDR")
    width, height, depth, colour, _compression, _filter, interlace = struct.unpack(">IIBBBBB", body)
    return PngHeader(width, height, depth, colour, interlace)


def decode_png(data: bytes) -> NDArray[np.uint8]:
    """Pixels as a (height, width, channels) array, for 8-bit RGB/RGBA non-interlaced PNGs."""
    header = read_png_header(data)
    if header.bit_depth != 8 or header.colour_type not in _CHANNELS or header.interlace:
        raise ValueError(f"unsupported PNG layout: {header}")
    channels = _CHANNELS[header.colour_type]
    raw = zlib.decompress(b"".join(body for kind, body in _chunks(data) if kind == b"IDAT"))
    stride = header.width * channels
    if len(raw) != header.height * (stride + 1):
        raise ValueError(f"PNG data is {len(raw)} bytes, expected {header.height * (stride + 1)}")
    scanlines = np.frombuffer(raw, dtype=np.uint8).reshape(header.height, stride + 1)
    pixels = np.empty((header.height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.uint8)
    for y in range(header.height):
        previous = pixels[y] = _unfilter(int(scanlines[y, 0]), scanlines[y, 1:], previous, channels)
    return pixels.reshape(header.height, header.width, channels)


def _unfilter(
    kind: int, line: NDArray[np.uint8], up: NDArray[np.uint8], channels: int
) -> NDArray[np.uint8]:
    # uint8 arithmetic wraps modulo 256, which is exactly the PNG filter arithmetic
    if kind == 0:
        return line
    if kind == 1:  # Sub: a running sum along the row, per channel
        return np.cumsum(line.reshape(-1, channels), axis=0, dtype=np.uint8).reshape(-1)
    if kind == 2:  # Up
        return line + up
    if kind in (3, 4):  # Average, Paeth: each byte needs its reconstructed left neighbour
        return np.array(_unfilter_sequential(kind, line.tolist(), up.tolist(), channels), np.uint8)
    raise ValueError(f"unknown PNG filter type {kind}")


def _unfilter_sequential(kind: int, line: list[int], up: list[int], channels: int) -> list[int]:
    out = [0] * len(line)
    for i, value in enumerate(line):
        left = out[i - channels] if i >= channels else 0
        above = up[i]
        if kind == 3:
            out[i] = (value + (left + above) // 2) & 0xFF
            continue
        corner = up[i - channels] if i >= channels else 0
        estimate = left + above - corner
        to_left, to_above, to_corner = (
            abs(estimate - left),
            abs(estimate - above),
            abs(estimate - corner),
        )
        if to_left <= to_above and to_left <= to_corner:
            predictor = left
        elif to_above <= to_corner:
            predictor = above
        else:
            predictor = corner
        out[i] = (value + predictor) & 0xFF
    return out
