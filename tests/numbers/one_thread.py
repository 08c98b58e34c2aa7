"""ATTNRANK_THREADS=1 keeps every computation on the calling thread.

Runs the CLI under tests/numbers/thread_counter.cpp (LD_PRELOAD: it counts
pthread_create) on work that is large enough to go parallel by default -- a scan
of several heads (with and without --jobs), a certified determinant, rank and SVD (the
directed products), an approximate reach (its two searches and its widths) and a masked
one at n = 256 (the entry order sorted beside the fit), width, check-kernel, an interval
layer (row blocks) -- and checks that no thread is started under the cap, and
that threads are started without it (so the counter sees them).

usage: one_thread.py CLI COUNTER.so SEED
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

cli, counter, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(f"seed {seed}")
rng = np.random.default_rng(seed)
workdir = tempfile.TemporaryDirectory(prefix="one-thread-")  # removed at exit
tmp = workdir.name


def softmax_rows(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def save(name, array):
    path = os.path.join(tmp, name)
    np.save(path, array)
    return path


n = 40
q = rng.standard_normal((6, n, 2))
k = rng.standard_normal((6, n, 2))
stack = save("stack.npy", softmax_rows(q @ k.transpose(0, 2, 1)))
target = save("target.npy", softmax_rows(rng.standard_normal((n, 3)) @ rng.standard_normal((3, n))))
square = save("square.npy", rng.standard_normal((400, 400)))
x = save("x.npy", rng.standard_normal((200, 16)))
w = [save(f"w{i}.npy", rng.standard_normal((16, 16)) / 4) for i in range(4)]

causal = np.tril(softmax_rows(rng.standard_normal((256, 3)) @ rng.standard_normal((3, 256))) + 1e-3)
causal_target = save("causal.npy", causal / causal.sum(axis=1, keepdims=True))
kq, kk, kv = (rng.standard_normal((1, 2, 128, 32)).astype(np.float32) for _ in range(3))
ks = np.einsum("bhnd,bhmd->bhnm", kq.astype(np.float64), kk.astype(np.float64)) / np.sqrt(32)
kernel_out = save("out.npy", (softmax_rows(ks) @ kv).astype(np.float32))
kernel_in = [save(f"{name}.npy", a) for name, a in (("kq", kq), ("kk", kk), ("kv", kv))]

runs = {
    "scan": ["scan", stack, "--dk", "2", "--epsilon", "1e-2", "--no-search"],
    "scan --jobs 2": ["scan", stack, "--dk", "2", "--jobs", "2", "--no-search"],
    "det --mode certified": ["det", square, "--mode", "certified"],
    "svd": ["svd", square],
    "reach --epsilon": ["reach", target, "--dk", "2", "--epsilon", "1e-3", "--time-limit", "0.5"],
    "reach --mask causal (n = 256: the entry order prefetched beside the fit)":
        ["reach", causal_target, "--dk", "2", "--epsilon", "1e-2", "--mask", "causal", "--no-search"],
    "width": ["width", target, "--epsilon", "1e-2", "--no-search"],
    "rank --mode certified": ["rank", square, "--mode", "certified"],
    "check-kernel": ["check-kernel", "--q", kernel_in[0], "--k", kernel_in[1], "--v", kernel_in[2],
                     "--candidate", kernel_out],
    "layer --tier interval": ["layer", "--x", x, "--wq", w[0], "--wk", w[1], "--wv", w[2], "--wo", w[3],
                              "--heads", "2", "--tier", "interval"],
}
# Work that goes parallel by default, so that the counter is seen to count.
parallel_by_default = {"scan", "scan --jobs 2", "det --mode certified", "layer --tier interval",
                       "reach --mask causal (n = 256: the entry order prefetched beside the fit)"}


def threads_started(args, cap):
    count_file = os.path.join(tmp, "count")
    if os.path.exists(count_file):
        os.remove(count_file)
    env = dict(os.environ, LD_PRELOAD=counter, THREAD_COUNT_FILE=count_file)
    env.pop("ATTNRANK_THREADS", None)
    if cap:
        env["ATTNRANK_THREADS"] = cap
    done = subprocess.run([cli] + args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: attnrank {' '.join(args)} exited {done.returncode}: {done.stderr}")
    with open(count_file) as f:
        return sum(int(line) for line in f)


failures = []
cores = os.cpu_count() or 1
for name, args in runs.items():
    capped = threads_started(args, "1")
    free = threads_started(args, None)
    print(f"{name}: {capped} threads with ATTNRANK_THREADS=1, {free} without")
    if capped != 0:
        failures.append(f"{name} started {capped} threads under ATTNRANK_THREADS=1")
    if cores >= 2 and name in parallel_by_default and free == 0:
        failures.append(f"{name} started no thread without the cap: the counter does not see them")
if failures:
    sys.exit("FAIL:\n" + "\n".join(failures))
print("ok")
