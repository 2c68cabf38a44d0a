"""Writes the application icons referenced by src-tauri/tauri.conf.json: PNGs (RGBA) for Linux,
icon.ico (PNG-compressed entries, Windows Vista and later) for Windows and icon.icns (PNG
entries) for macOS.

Run `python3 assets/icons/generate.py` from the repository root; it uses only the standard library.
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


def png_bytes(n: int) -> bytes:
    raw = b"".join(
        b"\0" + b"".join(pixel((x + 0.5) / n - 0.5, (y + 0.5) / n - 0.5) for x in range(n))
        for y in range(n)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", n, n, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def write_png(path: str, n: int) -> None:
    with open(path, "wb") as f:
        f.write(png_bytes(n))


def write_ico(path: str, sizes: list[int]) -> None:
    """ICONDIR, one ICONDIRENTRY per size, then the PNGs (a size of 256 is written as 0)."""
    images = [png_bytes(n) for n in sizes]
    offset = 6 + 16 * len(sizes)
    out = struct.pack("<HHH", 0, 1, len(sizes))
    for n, data in zip(sizes, images):
        out += struct.pack("<BBBBHHII", n % 256, n % 256, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
    with open(path, "wb") as f:
        f.write(out + b"".join(images))


def write_icns(path: str, entries: list[tuple[bytes, int]]) -> None:
    """'icns' + length, then (type, length, PNG) per entry."""
    body = b"".join(kind + struct.pack(">I", 8 + len(data)) + data for kind, data in ((k, png_bytes(n)) for k, n in entries))
    with open(path, "wb") as f:
        f.write(b"icns" + struct.pack(">I", 8 + len(body)) + body)


if __name__ == "__main__":
    for size, name in [(32, "32x32.png"), (128, "128x128.png"), (256, "128x128@2x.png"), (512, "icon.png")]:
        write_png(f"assets/icons/{name}", size)
    write_ico("assets/icons/icon.ico", [16, 24, 32, 48, 64, 256])
    write_icns("assets/icons/icon.icns", [(b"icp4", 16), (b"icp5", 32), (b"ic07", 128), (b"ic08", 256), (b"ic09", 512), (b"ic10", 1024)])
