"""examples/gpt2-sized-scan at a small size (docs/scan.md walks through the full one):
it runs, writes its rows and heatmap, and the scan finds what was planted -- every head
of planted width r <= d_k comes within epsilon at d_k (epsilon_verdict within) and has a
certified witness at a width <= r; the rows carry the planted widths."""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_small_gpt2_shaped_scan(tmp_path):
    out = tmp_path / "scan"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "gpt2-sized-scan"), "--layers", "2", "--heads",
                        "6", "--n", "40", "--d-model", "96", "--dk", "8", "--epsilon", "1e-3", "--out", str(out)],
                       capture_output=True, text=True, env={**os.environ}, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "12 heads scanned" in r.stdout and "planted width" in r.stdout
    rows = json.load(open(out / "scan.json"))["heads"]
    assert len(rows) == 12 and [row["index"] for row in rows] == [[l, h] for l in range(2) for h in range(6)]
    for row in rows:
        if row["planted_width"] <= 8:
            assert row["epsilon_verdict"] == "within", row
            assert row["width_upper"] is not None and row["width_upper"] <= row["planted_width"], row
        assert row["zero_entries"] == 0
    svg = open(out / "scan.svg").read()
    assert "<svg" in svg and "head (last index)" in svg
