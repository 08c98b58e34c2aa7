"""A scan's rows where researchers read them: a pandas DataFrame and a matplotlib
heatmap. Both are optional imports (Debian's python3-pandas, python3-matplotlib):
attnrank itself needs neither, and each function says which it needs when missing.

The heatmap shows what ``attnrank scan --svg`` shows: each head's minimal width within
epsilon (marked "≤" when only a witness bounds it from above, "≥" when none is found up
to max_dk), else E* at d_k (its certified upper bound), else the floor.
"""

import math
import textwrap
from fractions import Fraction

__all__ = ["scan_frame", "scan_heatmap"]


def _need(module, package):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise ImportError(f"{module} is needed for this (Debian: apt install {package})") from e


def _bound(text, up):
    """A bound's decimal string as the nearest float on its safe side (a float no smaller than
    an upper bound, no larger than a lower bound), so the column stays proven; NaN if absent."""
    if text is None:
        return float("nan")
    value = float(text)
    exact = Fraction(text)
    if up and Fraction(value) < exact:
        value = math.nextafter(value, math.inf)
    elif not up and Fraction(value) > exact:
        value = math.nextafter(value, -math.inf)
    return value


def scan_frame(rows):
    """The rows of ``attnrank.scan`` (or ``scan_model``) as a pandas DataFrame: one row per
    head, the leading indices as columns ``layer`` and ``head`` (``i0``, ``i1``, ... for
    other shapes), then every key of the rows ("floor_lower", "error_upper",
    "width_known", ...). error_lower and error_upper are floats rounded outward from the
    rows' decimal strings, so they remain proven bounds; missing bounds are NaN / None."""
    pd = _need("pandas", "python3-pandas")
    if not rows:
        return pd.DataFrame()
    depth = len(rows[0]["index"])
    names = ["layer", "head"] if depth == 2 else ["head"] if depth == 1 else [f"i{k}" for k in range(depth)]
    records = []
    for r in rows:
        record = dict(zip(names, r["index"]))
        record.update({k: v for k, v in r.items() if k != "index"})
        for key, up in (("error_lower", False), ("error_upper", True)):
            if key in record:
                record[key] = _bound(record[key], up)
        records.append(record)
    return pd.DataFrame.from_records(records)


def _cell(row):
    """(value, text) of a head's cell."""
    if row.get("width_lower") is not None:
        known = row.get("width_known")
        if known == "exact":
            return float(row["width_upper"]), str(row["width_upper"])
        if known in ("upper", "range"):
            return float(row["width_upper"]), "\u2264" + str(row["width_upper"])
        return float(row["width_lower"]), "\u2265" + str(row["width_lower"])
    if row.get("error_upper") is not None:
        return float(row["error_upper"]), f"{float(row['error_upper']):.1e}"
    if row.get("floor_upper") is None:
        return float("nan"), "0!"
    return float(row["floor_upper"]), str(row["floor_upper"])


def scan_heatmap(rows, *, epsilon=None, d_k=None, mask=None, title="scan", ax=None):
    """A matplotlib heatmap of a scan: rows the leading indices (layers), columns the last
    (heads), a colour bar, axis titles, and a title that says what the cells are
    (``epsilon``, ``d_k`` and ``mask`` as the scan was asked). Returns the Figure; draws
    into ``ax`` when given."""
    plt = _need("matplotlib.pyplot", "python3-matplotlib")
    np = _need("numpy", "python3-numpy")
    if not rows:
        raise ValueError("rows: the scan has no heads")
    cols = max((r["index"][-1] for r in rows if r["index"]), default=0) + 1
    nrows = (len(rows) + cols - 1) // cols
    values = np.full((nrows, cols), np.nan)
    texts = [["" for _ in range(cols)] for _ in range(nrows)]
    for t, r in enumerate(rows):
        values[t // cols, t % cols], texts[t // cols][t % cols] = _cell(r)
    own_figure = ax is None
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(4.5, 0.55 * cols + 2.5), max(2.5, 0.5 * nrows + 1.8)),
                               layout="constrained")
    else:
        fig = ax.figure
    image = ax.imshow(values, cmap="Blues", aspect="equal")
    widths = rows[0].get("width_lower") is not None
    what = (f"smallest head width within epsilon = {epsilon:g}" if widths and epsilon is not None
            else "smallest head width within epsilon" if widths
            else f"E* at d_k = {d_k} (certified upper bound)" if rows[0].get("error_upper") is not None
            else "floor of each head (upper bound)")
    setting = f"mask {mask if isinstance(mask, str) else 'none' if mask is None else 'from an array'}"
    if d_k is not None and widths:
        setting += f", d_k = {d_k}"
    # Wrapped to the width it may use (about 0.62 em a character), so no line is clipped:
    # the whole figure's when the figure is ours (a suptitle), else about 60% of it.
    lines = [f"{title}: {what}", setting]
    if widths:
        lines.append("\u2264w: a witness within epsilon at w, narrower widths not proven to miss; \u2265w: none found")
    share = 0.95 if own_figure else 0.6
    chars = max(24, int(share * fig.get_figwidth() * 72 / (9 * 0.62)))
    text = "\n".join(textwrap.fill(line, chars) for line in lines)
    if own_figure:
        fig.suptitle(text, x=0.02, ha="left", fontsize=9)
    else:
        ax.set_title(text, fontsize=9, loc="left")
    ax.set_xlabel("head (last index)")
    ax.set_ylabel("layer" if len(rows[0]["index"]) > 1 else "")
    ax.set_xticks(range(cols))
    ax.set_yticks(range(nrows))
    if cols * nrows <= 400:
        top = np.nanmax(values) if np.isfinite(values).any() else 1
        for i in range(nrows):
            for j in range(cols):
                v = values[i, j]
                ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=7,
                        color="white" if np.isfinite(v) and v > 0.6 * top else "black")
    fig.colorbar(image, ax=ax, label="width" if widths else "E*" if rows[0].get("error_upper") is not None else "floor")
    return fig
