"""A stack scanned through attnrank's Python module on a Dask LocalCluster of 2
worker processes (one thread each), and compared head by head with the CLI's JSON
lines of the same stack and options (bench/compare-scan, ATTNRANK_BENCH_STACK=1).

    dask_scan.py STACK.npy CLI_ROWS.jsonl d_k epsilon mask [time_limit]

Prints the wall time, the peak memory of the client and its workers (summed RSS,
and the anonymous part: without the stack file's mapped pages, sampled every 0.5 s),
and how many heads gave the CLI's answer. A head that reached the time limit in
either run may differ in its refined band (the limit is wall time); those are
counted apart, by their width brackets."""
import json
import sys
import threading
import time

import numpy as np
import psutil
import distributed

import attnrank


def peak_memory(stop, peak):
    me = psutil.Process()
    while not stop.is_set():
        total = anonymous = 0
        for p in [me] + me.children(recursive=True):
            try:
                total += p.memory_info().rss
                with open(f"/proc/{p.pid}/status") as f:
                    anonymous += 1024 * int(next(line for line in f if line.startswith("RssAnon:")).split()[1])
            except (psutil.Error, OSError, StopIteration):
                pass
        peak[0], peak[1] = max(peak[0], total), max(peak[1], anonymous)
        time.sleep(0.5)


def main():
    path, cli_rows, d_k, epsilon, mask = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    time_limit = float(sys.argv[6]) if len(sys.argv) > 6 else None  # None: the default's fixed work
    stack = np.load(path, mmap_mode="r")
    peak, stop = [0, 0], threading.Event()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        sampler = threading.Thread(target=peak_memory, args=(stop, peak), daemon=True)
        sampler.start()
        start = time.perf_counter()
        rows = attnrank.scan(stack, d_k=d_k, epsilon=epsilon, mask=mask, client=client, time_limit=time_limit)
        wall = time.perf_counter() - start
        stop.set()
    cli = {tuple(r["index"]): r for r in map(json.loads, open(cli_rows))}
    same = limited = limited_same_width = 0
    for r in rows:
        c = cli[tuple(r["index"])]
        if r["time_limit_reached"] or c["time_limit_reached"]:
            limited += 1
            limited_same_width += (r["width_lower"], r["width_upper"]) == (c["width_lower"], c["width_upper"])
        else:
            same += {k: v for k, v in r.items() if k != "seconds"} == {k: v for k, v in c.items() if k != "seconds"}
    print(f"  the same stack on a Dask LocalCluster (2 worker processes): {wall / 60:.1f} min, peak {peak[0] / 2**20:.0f} MB "
          f"({peak[1] / 2**20:.0f} MB anonymous); {same} of {len(rows) - limited} heads as the CLI's, "
          f"{limited} at the time limit in a run ({limited_same_width} with the CLI's width bracket)  "
          f"{'ok' if same == len(rows) - limited and wall <= 15 * 60 else 'MISSED'}")


if __name__ == "__main__":
    main()
