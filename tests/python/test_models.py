"""Weights to answers (attnrank/models.py) and the scan's table and figure
(attnrank/figures.py): save_safetensors reads back bit for bit through the CLI and an
independent reader; attention_patterns equals torch's own float64 forward; scan_model on
the tiny trained model gives the pipeline's answers (docs/scan.md); scan_frame and
scan_heatmap show every head."""
import importlib.machinery
import importlib.util
import json
import os
import struct
import subprocess
from fractions import Fraction

import numpy as np
import pytest

import attnrank

SEED = int(os.environ.get("ATTNRANK_TEST_SEED", "20261206"))
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TINY = os.path.join(ROOT, "examples", "data", "tiny-model")
print(f"seed ATTNRANK_TEST_SEED={SEED}")


def read_safetensors(path):
    """An independent reader (the format's specification), for the round trip."""
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    codes = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
             "U8": "u1", "BOOL": "?", "BF16": "<i2"}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        start, end = e["data_offsets"]
        out[name] = (e["dtype"], np.frombuffer(data[8 + length + start:8 + length + end],
                                               dtype=codes[e["dtype"]]).reshape(e["shape"]))
    return out, header.get("__metadata__")


def test_save_safetensors_round_trips_every_dtype(tmp_path):
    rng = np.random.default_rng(SEED)
    tensors = {"f64": rng.standard_normal((3, 4)), "f32": rng.standard_normal((2, 5)).astype(np.float32),
               "f16": rng.standard_normal(7).astype(np.float16), "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
               "u8": np.array([0, 255], dtype=np.uint8), "flag": np.array([True, False])}
    path = tmp_path / "t.safetensors"
    attnrank.save_safetensors(str(path), tensors, metadata={"format": "np"})
    back, meta = read_safetensors(path)
    assert meta == {"format": "np"}
    for name, value in tensors.items():
        assert back[name][1].dtype.kind == value.dtype.kind
        assert np.array_equal(back[name][1], value), name
    assert (len(open(path, "rb").read()) - 8 - struct.unpack("<Q", open(path, "rb").read(8))[0]) == sum(
        v.nbytes for v in tensors.values())
    with pytest.raises(ValueError, match="non-empty dict"):
        attnrank.save_safetensors(str(path), {})
    with pytest.raises(ValueError, match="no safetensors code"):
        attnrank.save_safetensors(str(path), {"c": np.array([1j])})


def test_saved_patterns_scan_as_the_array_does(tmp_path):
    """A stack written by save_safetensors and scanned by the CLI gives the rows
    attnrank.scan gives for the array (the time-limited optimiser off: reproducible)."""
    rng = np.random.default_rng(SEED)
    g = rng.standard_normal((2, 3, 9, 9))
    p = np.exp(g) / np.exp(g).sum(-1, keepdims=True)
    path = tmp_path / "p.safetensors"
    attnrank.save_safetensors(str(path), {"attention": p.astype(np.float32)})
    cli = os.environ["ATTNRANK_CLI"]
    out = subprocess.run([cli, "scan", f"{path}:attention", "--dk", "2", "--epsilon", "0.05", "--no-search", "--json"],
                         check=True, capture_output=True, text=True).stdout
    rows = attnrank.scan(p.astype(np.float32), d_k=2, epsilon=0.05, refine=False)
    for a, b in zip(json.loads(out)["heads"], rows):
        a.pop("seconds"), b.pop("seconds")
        assert a == b


def test_bfloat16_keeps_its_bits(tmp_path):
    torch = pytest.importorskip("torch")
    t = torch.randn(4, 3, generator=torch.Generator().manual_seed(SEED)).to(torch.bfloat16)
    path = tmp_path / "b.safetensors"
    attnrank.save_safetensors(str(path), {"b": t})
    dtype, bits = read_safetensors(path)[0]["b"]
    assert dtype == "BF16"
    assert np.array_equal(bits, t.view(torch.int16).numpy())


def load_tiny_model():
    torch = pytest.importorskip("torch")
    loader = importlib.machinery.SourceFileLoader("train_tiny_model", os.path.join(ROOT, "examples", "train-tiny-model"))
    spec = importlib.util.spec_from_loader("train_tiny_model", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    model = module.AttentionOnly()
    state = {k: torch.from_numpy(v[1].astype(np.float32)) for k, v in
             read_safetensors(os.path.join(TINY, "tiny-model.safetensors"))[0].items()}
    missing = model.load_state_dict(state, strict=False)
    assert list(missing.missing_keys) == ["mask"] and not missing.unexpected_keys
    return model, torch.from_numpy(np.load(os.path.join(TINY, "prompt.npy")))[None], state


def test_attention_patterns_of_the_tiny_model_are_its_own():
    """float64 patterns from the weights equal the model's float32 ones (the pipeline's
    attention.npy) to float32 rounding, and torch's float64 forward to 1e-12."""
    torch = pytest.importorskip("torch")
    model, prompt, state = load_tiny_model()
    p = attnrank.attention_patterns(model, prompt)
    saved = np.load(os.path.join(TINY, "attention.npy"))
    assert p.shape == (2, 1, 4, 16, 16) or p.shape == saved.shape
    p = p.reshape(saved.shape)
    assert np.max(np.abs(p - saved)) < 1e-5
    assert np.allclose(p.sum(-1), 1, atol=1e-14)
    assert np.all(np.triu(p, 1) == 0)
    # Each layer's input is the model's own (float32 here); a float64 model gives torch's
    # float64 patterns to rounding.
    keep = []
    model64 = model.double()
    p64 = attnrank.attention_patterns(model64, prompt).reshape(saved.shape)
    with torch.no_grad():
        model64(prompt, keep)
    reference = torch.stack([w[0] for w in keep]).numpy()
    assert np.max(np.abs(p64 - reference)) < 1e-12
    # The state-dict path: layer 0's input is x0.npy (the float32 model's, exactly); its
    # patterns are the module's.
    x0 = np.load(os.path.join(TINY, "x0.npy"))
    layer0 = attnrank.attention_patterns({k: v for k, v in state.items() if k.startswith("layers.0.")}, x0, heads=4)
    assert layer0.shape == (1, 4, 16, 16)  # (layers, heads, n, n): one prompt
    assert np.max(np.abs(layer0[0] - p[0])) < 1e-12
    with pytest.raises(ValueError, match="heads="):
        attnrank.attention_patterns(state, x0)
    with pytest.raises(ValueError, match="2 attention layers"):
        attnrank.attention_patterns(state, [x0], heads=4)
    with pytest.raises(ValueError, match="True = blocked"):
        attnrank.attention_patterns(model, prompt, mask=np.tril(np.ones((16, 16), dtype=bool)))


def test_scan_model_gives_the_pipelines_answers():
    """One step (scan_model) against the pipeline docs/scan.md used (capture patterns,
    save, scan): the same floors, and bands that overlap (both are proven for patterns
    within 1e-5 of each other; the widths agree where both are settled)."""
    model, prompt, _ = load_tiny_model()
    rows = attnrank.scan_model(model, prompt, d_k=2, epsilon=0.05, refine=False)
    saved = attnrank.scan(np.load(os.path.join(TINY, "attention.npy")), d_k=2, epsilon=0.05, mask="causal", refine=False)
    assert [r["index"] for r in rows] == [[l, h] for l in range(2) for h in range(4)]  # as the CLI's rows
    for a, b in zip(rows, saved):
        assert a["zero_entries"] == b["zero_entries"] == 0
        assert a["width_lower"] <= (b["width_upper"] or 99) and b["width_lower"] <= (a["width_upper"] or 99)
        assert float(a["error_lower"]) <= float(b["error_upper"]) + 1e-5
        assert float(b["error_lower"]) <= float(a["error_upper"]) + 1e-5


def test_cli_state_dict_scan_gives_scan_models_answers(tmp_path):
    """`attnrank scan --state-dict F --x X --heads H` with each layer's own input (captured
    here from the model) answers as scan_model does: the patterns agree to 1e-14 (two
    float64 computations), so the floors and verdicts agree and the proven bands overlap
    (the search's upper bounds may differ in the third digit: it follows the last bits)."""
    torch = pytest.importorskip("torch")
    model, prompt, _ = load_tiny_model()
    inputs = []
    hooks = [layer["attn"].register_forward_pre_hook(lambda m, args: inputs.append(args[0][0].double().numpy()))
             for layer in model.layers]
    with torch.no_grad():
        model(prompt)
    for h in hooks:
        h.remove()
    x = tmp_path / "x_layers.npy"
    np.save(x, np.stack(inputs))
    cli = os.environ["ATTNRANK_CLI"]
    out = subprocess.run([cli, "scan", "--state-dict", os.path.join(TINY, "tiny-model.safetensors") + ":layers",
                          "--x", str(x), "--heads", "4", "--mask", "causal", "--dk", "2", "--epsilon", "0.05",
                          "--no-search", "--json"], check=True, capture_output=True, text=True).stdout
    cli_rows = json.loads(out)["heads"]
    rows = attnrank.scan_model(model, prompt, d_k=2, epsilon=0.05, refine=False)
    assert [r["index"] for r in cli_rows] == [[l, h] for l in range(2) for h in range(4)]
    for a, b in zip(cli_rows, rows):
        for key in ("floor_lower", "floor_upper", "verdict", "zero_entries", "epsilon_verdict"):
            assert a[key] == b[key], key
        assert float(a["error_lower"]) <= float(b["error_upper"]) and float(b["error_lower"]) <= float(a["error_upper"])
    bad = subprocess.run([cli, "scan", "--state-dict", os.path.join(TINY, "tiny-model.safetensors"), "--x", str(x)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--heads" in bad.stderr and bad.stdout == ""


def rendered_inside(figure):
    """The figure saved as SVG and rendered by rsvg-convert (librsvg) on a canvas padded on
    every side: nothing it draws may fall outside its own box (tests/cli/svg_render.py does
    the same for the command line's figures)."""
    import re
    import shutil
    import sys
    import tempfile
    if shutil.which("rsvg-convert") is None:
        pytest.skip("rsvg-convert is missing: scripts/install-deps --test installs librsvg2-bin")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
    from svg_render import read_png
    pad = 40
    with tempfile.TemporaryDirectory() as work:
        svg = os.path.join(work, "figure.svg")
        figure.savefig(svg, format="svg")
        text = open(svg).read()
        m = re.search(r'width="([0-9.]+)pt" height="([0-9.]+)pt" viewBox="0 0 ([0-9.]+) ([0-9.]+)"', text)
        w, h = float(m.group(3)), float(m.group(4))
        padded = text.replace(m.group(0), f'width="{w + 2 * pad}pt" height="{h + 2 * pad}pt" '
                                          f'viewBox="{-pad} {-pad} {w + 2 * pad} {h + 2 * pad}"', 1)
        open(svg, "w").write(padded)
        png = os.path.join(work, "figure.png")
        subprocess.run(["rsvg-convert", "-o", png, svg], check=True)
        px = read_png(png)
        sy, sx = px.shape[0] / (h + 2 * pad), px.shape[1] / (w + 2 * pad)
        inside = np.zeros(px.shape[:2], dtype=bool)
        inside[int(pad * sy) - 1:int((pad + h) * sy) + 1, int(pad * sx) - 1:int((pad + w) * sx) + 1] = True
        assert px[..., 3][~inside].max(initial=0) == 0, "a figure draws outside its own box"


def test_scan_frame_and_heatmap():
    pd = pytest.importorskip("pandas")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.text  # noqa: F401
    rng = np.random.default_rng(SEED)
    g = rng.standard_normal((3, 4, 8, 8))
    p = np.exp(g) / np.exp(g).sum(-1, keepdims=True)
    rows = attnrank.scan(p, d_k=2, epsilon=0.05, refine=False)
    frame = attnrank.scan_frame(rows)
    assert isinstance(frame, pd.DataFrame) and len(frame) == 12
    assert list(frame[["layer", "head"]].itertuples(index=False, name=None)) == [(l, h) for l in range(3) for h in range(4)]
    assert {"width_lower", "width_upper", "width_known", "error_upper"} <= set(frame.columns)
    for r, lower, upper in zip(rows, frame["error_lower"], frame["error_upper"]):  # still proven: outward
        assert Fraction(lower) <= Fraction(r["error_lower"]) and Fraction(upper) >= Fraction(r["error_upper"])
    fig = attnrank.scan_heatmap(rows, epsilon=0.05, d_k=2, mask=None, title="random heads")
    ax = fig.axes[0]
    title = fig._suptitle.get_text()
    assert "epsilon = 0.05" in title and "d_k = 2" in title and "random heads" in title
    assert ax.get_xlabel() == "head (last index)" and ax.get_ylabel() == "layer"
    assert len(fig.axes) == 2  # the colour bar
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 12
    for r, t in zip(rows, texts):  # each cell its head's bracket, as the CLI's heatmap writes it
        lo, hi, known = r["width_lower"], r["width_upper"], r["width_known"]
        assert t == {"exact": f"={hi}", "range": f"{lo}..{hi}", "upper": f"\u2264{hi}", "lower": f"\u2265{lo}"}[known]
    kinds = {r["width_known"] for r in rows}
    for kind, start in (("exact", "=w:"), ("range", "a..b:"), ("upper", "\u2264w:"), ("lower", "\u2265w:")):
        assert (f"\n{start}" in title or title.startswith(start) or f" {start}" in title) == (kind in kinds), kind
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == sum(1 for r in rows if r["width_known"] != "exact")  # open brackets marked
    brackets = attnrank.scan_brackets({0.05: rows, 0.5: attnrank.scan(p, d_k=2, epsilon=0.5, refine=False)},
                                      title="random heads")
    assert [t.get_text() for t in brackets.axes[0].get_legend().get_texts()] == ["epsilon = 0.05", "epsilon = 0.5"]
    # Nothing is clipped: every text drawn lies inside the figure, for this layout and a
    # one-head scan with a long title (the narrowest figure).
    one = attnrank.scan(p[:1, :1], d_k=2, epsilon=0.05, refine=False)
    rendered_inside(brackets)  # (its axis keeps tick texts outside the view, never drawn: the render decides)
    for figure in (fig, attnrank.scan_heatmap(one, epsilon=0.05, d_k=2, mask="causal",
                                              title="a rather long name of a model and of its prompt")):
        rendered_inside(figure)
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        box = figure.bbox
        for t in figure.findobj(matplotlib.text.Text):
            if t.get_visible() and t.get_text():
                e = t.get_window_extent(renderer)
                assert e.x0 >= box.x0 - 1 and e.x1 <= box.x1 + 1 and e.y0 >= box.y0 - 1 and e.y1 <= box.y1 + 1, \
                    t.get_text()
