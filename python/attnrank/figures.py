"""A scan's rows where researchers read them: a pandas DataFrame and a matplotlib
heatmap. Both are optional imports (Debian's python3-pandas, python3-matplotlib):
attnrank itself needs neither, and each function says which it needs when missing.

The heatmap shows what ``attnrank scan --svg`` shows: each head's minimal width within
epsilon as its bracket ("=w" proven, "a..b", "≤w" with only a witness, "≥w" with none up to
max_dk), coloured by the proven lower end, open brackets hatched; else E* at d_k (its
certified upper bound), else the floor. The bracket plot draws the brackets as intervals,
for one epsilon or several side by side.
"""

import math
import textwrap
from fractions import Fraction

__all__ = ["scan_frame", "scan_heatmap", "scan_brackets"]


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


# What each kind of width cell shows, one sentence each, true of every cell of its kind
# (the CLI's heatmap says the same).
_KIND_SENTENCE = {
    "exact": "=w: the smallest width within epsilon is w, proven both ways",
    "range": "a..b: every width below a proven to miss; a witness within epsilon at b",
    "upper": "\u2264w: a witness within epsilon at w; no narrower width proven to miss",
    "lower": "\u2265w: every width below w proven to miss; no witness within epsilon up to max d_k",
}


def _cell(row):
    """(value, text, kind) of a head's cell: a width bracket coloured by its proven lower end."""
    if row.get("width_lower") is not None:
        known, lo, hi = row.get("width_known"), row["width_lower"], row.get("width_upper")
        text = {"exact": f"={hi}", "range": f"{lo}..{hi}", "upper": f"\u2264{hi}"}.get(known, f"\u2265{lo}")
        return float(lo), text, known if known in _KIND_SENTENCE else "lower"
    if row.get("error_upper") is not None:
        return float(row["error_upper"]), f"{float(row['error_upper']):.1e}", None
    if row.get("floor_upper") is None:
        return float("nan"), "0!", None
    return float(row["floor_upper"]), str(row["floor_upper"]), None


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
    kinds = [[None for _ in range(cols)] for _ in range(nrows)]
    for t, r in enumerate(rows):
        values[t // cols, t % cols], texts[t // cols][t % cols], kinds[t // cols][t % cols] = _cell(r)
    own_figure = ax is None
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(4.5, 0.55 * cols + 2.5), max(2.5, 0.5 * nrows + 1.8)),
                               layout="constrained")
    else:
        fig = ax.figure
    image = ax.imshow(values, cmap="Blues", aspect="equal")
    widths = rows[0].get("width_lower") is not None
    what = (f"smallest head width within epsilon = {epsilon!r}" if widths and epsilon is not None
            else "smallest head width within epsilon" if widths
            else f"E* at d_k = {d_k} (certified upper bound)" if rows[0].get("error_upper") is not None
            else "floor of each head (upper bound)")
    setting = f"mask {mask if isinstance(mask, str) else 'none' if mask is None else 'from an array'}"
    if d_k is not None and widths:
        setting += f", d_k = {d_k}"
    # Wrapped to the width it may use (about 0.62 em a character), so no line is clipped:
    # the whole figure's when the figure is ours (a suptitle), else about 60% of it.
    lines = [f"{title}: {what}", setting]
    present = [k for k in _KIND_SENTENCE if any(k in row for row in kinds)]
    lines += [_KIND_SENTENCE[k] for k in present]
    if present:
        lines.append("colour: the proven lower end of the bracket"
                     + ("; hatched: an open bracket (the width is not pinned)" if set(present) - {"exact"} else ""))
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
    for i in range(nrows):
        for j in range(cols):
            if kinds[i][j] not in (None, "exact"):  # an open bracket: hatched
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.45",
                                           linewidth=0))
    if cols * nrows <= 400:
        top = np.nanmax(values) if np.isfinite(values).any() else 1
        for i in range(nrows):
            for j in range(cols):
                v = values[i, j]
                ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=7,
                        color="white" if np.isfinite(v) and v > 0.6 * top else "black")
    fig.colorbar(image, ax=ax, label="width (proven lower end)" if widths
                 else "E*" if rows[0].get("error_upper") is not None else "floor")
    return fig


def scan_brackets(rows, *, epsilon=None, title="scan", ax=None):
    """A bracket plot: each head's smallest width within epsilon as an interval, heads along
    the horizontal axis ("layer.head"), widths up the vertical one: a dot where the width is
    proven (=w), a bar from the proven lower end to the witness (a..b, \u2264w), an arrow up
    from the lower end where no witness was found (\u2265w). ``rows`` is one scan's rows, or a
    dict {epsilon: rows} to draw several epsilons side by side (each in its own colour, a
    legend naming them as given). Returns the Figure; draws into ``ax`` when given."""
    plt = _need("matplotlib.pyplot", "python3-matplotlib")
    series = rows if isinstance(rows, dict) else {epsilon: rows}
    if not series or not all(series.values()):
        raise ValueError("rows: the scan has no heads")
    first = next(iter(series.values()))
    if any(r.get("width_lower") is None for rs in series.values() for r in rs):
        raise ValueError("rows: a bracket plot needs the widths of a scan with epsilon")
    labels = [".".join(str(i) for i in r["index"]) or "0" for r in first]
    own_figure = ax is None
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(5.0, 0.32 * len(labels) + 2.5), 3.8), layout="constrained")
    else:
        fig = ax.figure
    count = len(series)
    for s, (eps, rs) in enumerate(series.items()):
        colour = plt.get_cmap("tab10")(s)
        offset = (s - (count - 1) / 2) * 0.22
        for x, r in enumerate(rs):
            lo, hi, known = r["width_lower"], r.get("width_upper"), r.get("width_known")
            xs = x + offset
            if known == "exact":
                ax.plot([xs], [hi], "o", color=colour, markersize=4)
            elif hi:
                ax.plot([xs, xs], [lo, hi], "-", color=colour, linewidth=2.2, solid_capstyle="butt")
                ax.plot([xs], [hi], "_", color=colour, markersize=7)
            else:
                top = r.get("max_d_k", lo) + 0.6
                ax.annotate("", xy=(xs, top), xytext=(xs, lo), arrowprops={"arrowstyle": "->", "color": colour})
        ax.plot([], [], "-", color=colour, linewidth=2.2, label=f"epsilon = {eps!r}" if eps is not None else "the scan")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=90 if len(labels) > 16 else 0, fontsize=7)
    ax.set_xlabel("head (layer.head)")
    ax.set_ylabel("smallest width within epsilon")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=7, loc="upper left")
    text = (f"{title}: width brackets, certified both ways (dot: proven width; bar: from the proven lower end to "
            "a witness; arrow: no witness up to max d_k)")
    wrapped = textwrap.fill(text, max(30, int((0.95 if own_figure else 0.6) * fig.get_figwidth() * 72 / (9 * 0.62))))
    if own_figure:
        fig.suptitle(wrapped, x=0.02, ha="left", fontsize=9)
    else:
        ax.set_title(wrapped, fontsize=9, loc="left")
    return fig
