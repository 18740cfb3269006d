"""The HTML report renders in a real browser: headless Chromium takes a screenshot that is not
blank and logs no console message (the page has no script; a message would be an error).

`make test` installs Debian's `chromium` when it is missing and it runs as root with apt-get, and
otherwise stops before the tests saying what to install (`make browser`); without a browser the
test fails and says how to get one: it never skips."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from alert_builders import RECLAIM
from builders import guide_layout
from history_builders import at, ms, record

from quota_controller.domain.config.model import QuotaDocument
from quota_local.history_report import build_report
from quotactl.report_html import render_html

H = 3600


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is required: `make browser` (part of make test) installs it")
    return found


def _shoot(page: Path, png: Path) -> str:
    """Render the page; returns Chromium's log (console messages are lines with :CONSOLE)."""
    done = subprocess.run(
        [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
            "--v=0", "--window-size=1200,1400", f"--screenshot={png}", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert png.exists(), done.stderr
    return done.stderr


def _pixels(png: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) pixels of an 8-bit PNG (what Chromium writes)."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert (depth, color in (2, 6)) == (8, True)
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def test_the_report_renders_with_plots_and_no_console_message(tmp_path: Path) -> None:
    doc = QuotaDocument.model_validate(guide_layout().build())
    records = [
        record("a1").share("team-a").type("ml.g5.xlarge", 2).submitted(0, 30).ran(30, 5 * H)
        .status("SUCCEEDED", 5 * H).build(),
        record("b1").share("team-b").submitted(H, H + 900).ran(H + 900, 2 * H, preempted=RECLAIM)
        .ran(3 * H, 4 * H).status("SUCCEEDED", 4 * H).build(),
    ]  # fmt: skip
    report = build_report("ml-training", records, doc, ms(at(0)), ms(at(6 * H)))
    page = tmp_path / "report.html"
    page.write_text(render_html(report, "6h"), encoding="utf-8")
    log = _shoot(page, tmp_path / "shot.png")
    assert [line for line in log.splitlines() if ":CONSOLE" in line] == []
    width, height, rows = _pixels(tmp_path / "shot.png")
    background = rows[0][:3]
    bpp = len(rows[0]) // width
    inked = sum(
        1 for row in rows for x in range(0, len(row), bpp * 4) if row[x : x + 3] != background
    )
    assert inked > 0.02 * width * height / 4, "the screenshot is (nearly) blank"
    colours = {row[x : x + 3] for row in rows[::8] for x in range(0, len(row), bpp * 8)}
    assert len(colours) > 5  # plots in colour, not only text


def test_a_console_message_would_be_caught(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<!doctype html><script>console.error('boom')</script>", encoding="utf-8")
    log = _shoot(page, tmp_path / "bad.png")
    assert any(":CONSOLE" in line and "boom" in line for line in log.splitlines())
