#!/usr/bin/python3
"""The scan heatmap renders with nothing clipped: for stacks of several shapes (one
head, layers x heads, 12 x 12, 40 heads in a row, a long file name, every kind of
width mark), `attnrank scan --svg` is rendered by rsvg-convert (librsvg) twice: as
written, and inside a canvas padded by PAD pixels on every side. Anything the figure
draws outside its own box shows up in the padding, so every padded pixel must stay
transparent; and the title, axis titles and legend must be there (XML).

    svg_render.py path/to/attnrank          (seed: ATTNRANK_TEST_SEED, printed)
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

import numpy as np

PAD = 60
SVG = "{http://www.w3.org/2000/svg}"


def read_png(path):
    """RGBA pixels of an 8-bit, non-interlaced PNG (what rsvg-convert writes), as an
    (h, w, 4) uint8 array: IHDR, the IDAT stream, and the five row filters."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            bpp = 4 if colour == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + bpp * w)
    out = np.zeros((h, bpp * w), dtype=np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros(bpp * w, dtype=np.int32)
        if f == 0:
            out[y] = line
        elif f == 2:
            out[y] = (line + prev) & 255
        elif f == 1:  # each byte adds the same channel of the pixel to its left: a running sum
            out[y] = np.cumsum(line.reshape(w, bpp), axis=0).reshape(-1) & 255
        else:  # 3 (average) and 4 (Paeth) depend on the decoded left pixel: byte by byte
            row = np.zeros(bpp * w, dtype=np.int32)
            for x in range(bpp * w):
                a = row[x - bpp] if x >= bpp else 0
                b = prev[x]
                c = prev[x - bpp] if x >= bpp else 0
                if f == 1:
                    p = a
                elif f == 3:
                    p = (a + b) // 2
                else:
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                row[x] = (line[x] + p) & 255
            out[y] = row
    out = out.reshape(h, w, bpp)
    if bpp == 3:  # opaque: alpha 255 everywhere
        out = np.concatenate([out, np.full((h, w, 1), 255, dtype=np.int32)], axis=2)
    return out.astype(np.uint8)


def check(cli, work, name, array, args):
    path = os.path.join(work, name + ".npy")
    np.save(path, array)
    svg = os.path.join(work, name + ".svg")
    subprocess.run([cli, "scan", path, *args, "--svg", svg], check=True, stdout=subprocess.DEVNULL)
    text = open(svg).read()
    root = ET.fromstring(text)
    w, h = float(root.get("width")), float(root.get("height"))
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    cells = sum(1 for e in root.iter() if e.get("class") == "cell")
    assert cells == array.size // (array.shape[-1] * array.shape[-2]), (name, cells)
    assert any(t.startswith("scan of ") and name in t for t in texts), (name, "title")
    assert "head (last index)" in texts and sum(1 for e in root.iter() if e.get("class") == "legend") > 0, name
    if "--epsilon" in args:
        eps = float(args[args.index("--epsilon") + 1])
        said = [float(re.search(r"epsilon = ([0-9.e+-]+)", t).group(1)) for t in texts if "epsilon = " in t]
        assert eps in said, (name, "epsilon in the title", said)
    if "--dk" in args:
        assert any("d_k = " + args[args.index("--dk") + 1] in t for t in texts), (name, "d_k in the title")
    # The same drawing on a canvas PAD larger on every side.
    padded = re.sub(r'width="[^"]*" height="[^"]*" viewBox="[^"]*"',
                    f'width="{w + 2 * PAD:.2f}" height="{h + 2 * PAD:.2f}" '
                    f'viewBox="{-PAD:.2f} {-PAD:.2f} {w + 2 * PAD:.2f} {h + 2 * PAD:.2f}"', text, count=1)
    assert padded != text
    padded_svg = os.path.join(work, name + ".padded.svg")
    open(padded_svg, "w").write(padded)
    png = os.path.join(work, name + ".png")
    subprocess.run(["rsvg-convert", "-o", png, padded_svg], check=True)
    px = read_png(png)
    inside = np.zeros(px.shape[:2], dtype=bool)
    inside[PAD:PAD + int(np.ceil(h)), PAD:PAD + int(np.ceil(w))] = True
    outside = px[..., 3][~inside]
    assert outside.max(initial=0) == 0, f"{name}: {int((outside > 0).sum())} pixels drawn outside the figure's box"
    # And the figure as written renders (no empty band: ink in its top 60 pixels).
    plain = os.path.join(work, name + ".plain.png")
    subprocess.run(["rsvg-convert", "-o", plain, svg], check=True)
    ink = read_png(plain)[..., :3].min(axis=2) < 128
    assert ink[:60].any(), f"{name}: nothing drawn in the top 60 pixels"
    print(f"{name}: {w:.0f} x {h:.0f} px, {cells} cells, nothing outside the box")


def planted(rng, shape, width, causal):
    n = shape[-1]
    q = rng.standard_normal(shape[:-1] + (width,))
    k = rng.standard_normal(shape[:-1] + (width,))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(width)
    if causal:
        s = np.where(np.tril(np.ones((n, n))) > 0, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main():
    cli = sys.argv[1]
    if shutil.which("rsvg-convert") is None:
        print("rsvg-convert is missing: scripts/install-deps --test installs librsvg2-bin")
        return 1
    seed = int(os.environ.get("ATTNRANK_TEST_SEED", "20261206"))
    print(f"seed ATTNRANK_TEST_SEED={seed}")
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as work:
        check(cli, work, "one", planted(rng, (1, 8, 8), 2, False), ["--dk", "2"])
        check(cli, work, "layers", planted(rng, (3, 4, 10, 10), 3, True),
              ["--mask", "causal", "--dk", "3", "--epsilon", "0.001", "--time-limit", "0.2"])
        check(cli, work, "gpt2_shaped", planted(rng, (12, 12, 6, 6), 2, False), ["--epsilon", "0.05", "--time-limit", "0.1"])
        check(cli, work, "a_very_long_file_name_of_attention_patterns_saved_from_a_model",
              planted(rng, (2, 40, 5, 5), 2, False), [])
        check(cli, work, "noisy", planted(rng, (2, 3, 12, 12), 8, False),
              ["--epsilon", "1e-6", "--max-dk", "3", "--dk", "2", "--time-limit", "0.1"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
