#!/usr/bin/python3
"""The figures render with nothing clipped and say what is proven: for stacks of several
shapes (one head, layers x heads, 12 x 12, 40 heads in a row, a long file name, every kind
of width bracket), `attnrank scan --svg` and `--brackets-svg`, and `attnrank width --svg`,
are rendered by rsvg-convert (librsvg) twice: as written, and inside a canvas padded by PAD
pixels on every side. Anything a figure draws outside its own box shows up in the padding,
so every padded pixel must stay transparent; and the title, axis titles and legend must be
there (XML). Each heatmap cell's text is its head's bracket from the scan's JSON ("=w",
"a..b", "\u2264w", "\u2265w"), the legend has a sentence for each kind of cell present and for
no other, and every open bracket is marked; epsilon is printed as given.

    svg_render.py path/to/attnrank          (seed: ATTNRANK_TEST_SEED, printed)
"""
import json
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


def rendered_inside(work, name, svg):
    """Renders `svg` (rsvg-convert) as written and inside a canvas PAD larger on every side:
    every padded pixel must stay transparent (nothing drawn outside the figure's box), and
    the figure as written must have ink in its top 60 pixels. Returns (width, height, root)."""
    text = open(svg).read()
    root = ET.fromstring(text)
    w, h = float(root.get("width")), float(root.get("height"))
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
    plain = os.path.join(work, name + ".plain.png")
    subprocess.run(["rsvg-convert", "-o", plain, svg], check=True)
    ink = read_png(plain)[..., :3].min(axis=2) < 128
    assert ink[:60].any(), f"{name}: nothing drawn in the top 60 pixels"
    return w, h, root


# The legend's sentence for each kind of width cell, and the text such a cell shows.
SENTENCES = {
    "exact": "=w: the smallest width within epsilon is w, proven both ways",
    "range": "a..b: every width below a proven to miss; a witness within epsilon at b",
    "upper": "\u2264w: a witness within epsilon at w; no narrower width proven to miss",
    "lower": "\u2265w: every width below w proven to miss; no witness within epsilon up to max d_k",
}


def bracket_text(row):
    lo, hi, known = row["width_lower"], row.get("width_upper"), row["width_known"]
    return {"exact": f"={hi}", "range": f"{lo}..{hi}", "upper": f"\u2264{hi}"}.get(known, f"\u2265{lo}")


def check(cli, work, name, array, args):
    path = os.path.join(work, name + ".npy")
    np.save(path, array)
    svg = os.path.join(work, name + ".svg")
    extra = ["--brackets-svg", os.path.join(work, name + ".brackets.svg")] if "--epsilon" in args else []
    done = subprocess.run([cli, "scan", path, *args, "--svg", svg, "--json", *extra], check=True,
                          capture_output=True, text=True)
    rows = json.loads(done.stdout)["heads"]
    w, h, root = rendered_inside(work, name, svg)
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    cells = sum(1 for e in root.iter() if e.get("class") == "cell")
    assert cells == array.size // (array.shape[-1] * array.shape[-2]), (name, cells)
    assert any(t.startswith("scan of ") and name in t for t in texts), (name, "title")
    assert "head (last index)" in texts and sum(1 for e in root.iter() if e.get("class") == "legend") > 0, name
    if "--epsilon" in args:
        given = args[args.index("--epsilon") + 1]
        assert any(t.endswith("epsilon = " + str(float(given))) or t.endswith("epsilon = " + given) for t in texts), \
            (name, "epsilon as given in the title", given)
        # Each cell's text is its head's bracket, in order; the legend has a true sentence
        # for each kind of cell present and none for a kind absent; open brackets are marked.
        expected = [bracket_text(r) for r in rows]
        shown = [t for t in texts if re.fullmatch(r"=\d+|\d+\.\.\d+|[\u2264\u2265]\d+", t)]
        assert shown == expected, (name, shown, expected)
        kinds = {r["width_known"] for r in rows}
        for kind, sentence in SENTENCES.items():
            assert (sentence in texts) == (kind in kinds), (name, kind)
        opened = sum(1 for e in root.iter() if e.get("class") == "open")
        assert opened == sum(1 for r in rows if r["width_known"] != "exact"), (name, "open brackets marked")
        bw, bh, broot = rendered_inside(work, name + ".brackets", os.path.join(work, name + ".brackets.svg"))
        marks = sum(1 for e in broot.iter() if e.get("class") == "bracket")
        assert marks == len(rows), (name, "a bracket per head", marks)
        print(f"{name}.brackets: {bw:.0f} x {bh:.0f} px, {marks} brackets, nothing outside the box")
    if "--dk" in args:
        assert any("d_k = " + args[args.index("--dk") + 1] in t for t in texts), (name, "d_k in the title")
    print(f"{name}: {w:.0f} x {h:.0f} px, {cells} cells, nothing outside the box")


def check_width(cli, work, name, array, epsilon, args):
    """`attnrank width --svg`: nothing clipped (the title whole), epsilon as given, a log
    axis (decade labels), a band per d_k, the bracket's columns shaded."""
    path = os.path.join(work, name + ".npy")
    np.save(path, array)
    svg = os.path.join(work, name + ".width.svg")
    done = subprocess.run([cli, "width", path, "--epsilon", epsilon, *args, "--svg", svg, "--json"], check=True,
                          capture_output=True, text=True)
    result = json.loads(done.stdout)
    w, h, root = rendered_inside(work, name + ".width", svg)
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    assert any(t.startswith(path) and t.endswith("of the best head of width d_k") for t in texts), (name, "title")
    assert "epsilon = " + epsilon in texts, (name, "epsilon as given", texts)
    assert sum(1 for t in texts if re.fullmatch(r"1e-?\d+", t)) >= 2, (name, "a log axis")
    bands = sum(1 for e in root.iter() if e.get("class") == "band")
    assert bands == len(result["profile"]), (name, bands)
    lo, hi = result["width_lower"], result["width_upper"] or result["max_d_k"]
    shaded = sum(1 for e in root.iter() if e.get("class") == "bracket")
    assert shaded == sum(1 for p in result["profile"] if lo <= p["d_k"] <= hi), (name, "the bracket shaded")
    print(f"{name}.width: {w:.0f} x {h:.0f} px, {bands} bands, nothing outside the box")


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
        check(cli, work, "brackets", planted(rng, (3, 4, 16, 16), 5, True),
              ["--mask", "causal", "--epsilon", "0.01", "--no-search"])
        check_width(cli, work, "a_target_with_a_long_name_from_a_model_layer_3_head_7", planted(rng, (24, 24), 4, False),
                    "0.01", [])
        check_width(cli, work, "causal_width", planted(rng, (20, 20), 3, True), "0.05", ["--mask", "causal"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
