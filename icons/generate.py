"""Writes the application icons (PNG, RGBA) referenced by src-tauri/tauri.conf.json.

Run `python3 icons/generate.py` from the repository root; it uses only the standard library.
"""
import math
import struct
import zlib

INK = bytes([37, 67, 120, 255])
PAPER = bytes([236, 240, 247, 255])
CLEAR = bytes([0, 0, 0, 0])


def pixel(x: float, y: float) -> bytes:
    if math.hypot(x, y) >= 0.46:
        return CLEAR
    lines = ((0.0, 0.07, 0.24), (-0.16, 0.04, 0.18), (0.16, 0.04, 0.12))
    on_line = any(abs(y - cy) < h and abs(x) < w for cy, h, w in lines)
    return PAPER if on_line else INK


def write_png(path: str, n: int) -> None:
    raw = b"".join(
        b"\0" + b"".join(pixel((x + 0.5) / n - 0.5, (y + 0.5) / n - 0.5) for x in range(n))
        for y in range(n)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", n, n, 8, 6, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    for size, name in [(32, "32x32.png"), (128, "128x128.png"), (256, "128x128@2x.png"), (512, "icon.png")]:
        write_png(f"icons/{name}", size)
