"""Benchmark of the memory tool's index (issue 6, item 6).  Run: ``python benchmarks/bench_memory.py``.

Prints, for stores of 1k, 10k and ~100k memories: ``memory_read`` search latency
of our index and of brute-force numpy cosine over every embedding (MLGym's
method), both alone and end to end with the all-MiniLM-L6-v2 query embedding;
recall@10 of the approximate index against exact search; and the longest time
a write was blocked while the HNSW index was built and later extended.

Stored vectors are synthetic (unit 384-d vectors scattered around topic
centres, like sentence embeddings of notes on a few hundred subjects) so that
the 100k store builds in seconds; the query embedding uses the real model.
Search timings run in ``--rounds`` rounds (a block of each method, in an order
shuffled per round); the speedup is taken round by round and printed as its median,
IQR and min-max, and the end-to-end calls are paired query by query.
Options: ``--sizes 1000,10000,100000``, ``--queries 200``, ``--rounds 5``, ``--json``
(figures only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
from _paired import load, ratios, rounds, spread
from rgym_tools_memory.embedders import MiniLMEmbedder, normalise
from rgym_tools_memory.index import IndexConfig, VectorIndex, recall_at_k
from rich.console import Console
from rich.table import Table

DIM = 384
K = 10
TARGET_SPEEDUP = 20.0
TARGET_RECALL = 0.95
TARGET_BLOCK_MS = 100.0
QUERY_TEXTS = [
    "which learning rate stopped the loss from diverging?",
    "did data augmentation help the image classifier",
    "out of memory errors with large batches",
    "best validation score so far and its config",
    "ideas that failed and why",
    "how long does one epoch take",
]


def embedding_like(n: int, rng: np.random.Generator, centers: np.ndarray) -> np.ndarray:
    """Unit vectors around random topic centres (cosine to own centre about 0.7)."""
    picks = centers[rng.integers(0, len(centers), n)]
    return normalise(picks + 0.045 * rng.standard_normal((n, DIM), dtype=np.float32))


def brute_force(matrix: np.ndarray, q: np.ndarray, k: int = K) -> np.ndarray:
    """MLGym's method: cosine against every stored embedding, then the top k."""
    scores = matrix @ q
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def per_call_ms(fn, items) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        times.append((time.perf_counter() - started) * 1000)
    return times


def interleaved_ms(fns, items) -> list[list[float]]:  # type: ignore[no-untyped-def]
    """Per-call ms of each of ``fns`` on each item, the calls interleaved so that
    every method sees the same machine load."""
    times: list[list[float]] = [[] for _ in fns]
    for item in items:
        for slot, fn in enumerate(fns):
            started = time.perf_counter()
            fn(item)
            times[slot].append((time.perf_counter() - started) * 1000)
    return times


def timed_writes(index: VectorIndex, rows: np.ndarray, until) -> tuple[list[float], int]:  # type: ignore[no-untyped-def]
    """Add rows one by one (as memory_write does) until ``until()``; per-add ms."""
    times, used = [], 0
    while used < len(rows) and not until():
        started = time.perf_counter()
        index.add(rows[used:used + 1])
        times.append((time.perf_counter() - started) * 1000)
        used += 1
        time.sleep(0.003)  # an agent's writes are far apart; leave the builder the CPU
    return times, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds of the search timings")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    opts = parser.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",")]
    # wide enough for the table when the output goes to a file or a pipe
    console = Console(stderr=opts.json, width=None if sys.stdout.isatty() else 130)
    rng = np.random.default_rng(0)
    centers = normalise(rng.standard_normal((500, DIM), dtype=np.float32))
    biggest = max(sizes)
    extra = 8000
    data = embedding_like(biggest + extra, rng, centers)
    queries = embedding_like(opts.queries, rng, centers)
    bench_started = time.perf_counter()

    console.print("loading all-MiniLM-L6-v2 (offline)...")
    embedder = MiniLMEmbedder()
    started = time.perf_counter()
    embedder.model()
    load_s = time.perf_counter() - started
    embedder.embed(QUERY_TEXTS[:1])  # warm up
    embed_ms = per_call_ms(lambda t: embedder.embed([t]), QUERY_TEXTS * 5)
    embed_med = statistics.median(embed_ms)

    rows, figures = [], {"embed_query_ms": round(embed_med, 3), "model_load_s": round(load_s, 2)}
    for n in sizes:
        console.print(f"store of {n:,} memories...")
        index = VectorIndex(DIM, IndexConfig())
        write_figures = {}
        if n >= index.config.approx_threshold:
            started = time.perf_counter()
            index.add(data[:n])  # starts the background HNSW build
            during_build, used = timed_writes(index, data[n:n + extra],
                                              lambda ix=index: ix.stats.builds >= 1)
            build_s = time.perf_counter() - started
            # keep writing until the delta has been merged into a copy of the HNSW index
            during_merge, _ = timed_writes(index, data[n + used:n + extra],
                                           lambda ix=index: ix.stats.builds >= 2)
            index.wait()
            write_figures = {
                "build_s": round(build_s, 2), "writes_during_build": len(during_build),
                "max_write_block_ms_build": round(max(during_build, default=0.0), 3),
                "writes_during_merge": len(during_merge),
                "max_write_block_ms_merge": round(max(during_merge, default=0.0), 3),
                "merges": index.stats.builds - 1, "ef_search": index.stats.ef_search,
                "tuned_recall": index.stats.measured_recall,
            }
        else:
            index.add(data[:n])
        matrix = index.vectors()
        # ``--rounds`` rounds, each a block of our searches and a block of brute-force
        # scans in an order shuffled per round (interleaving single calls would let each
        # 150 MB scan evict the index from the CPU caches); the speedup is taken within
        # each round (median brute / median ours) and its spread over rounds printed
        got = rounds({"ours": lambda ix=index: per_call_ms(lambda v: ix.search(v, K), queries),  # noqa: B023
                      "brute": lambda m=matrix: per_call_ms(lambda v: brute_force(m, v), queries)},  # noqa: B023
                     opts.rounds, seed=n)
        ours_rounds = [statistics.median(r) for r in got["ours"]]
        brute_rounds = [statistics.median(r) for r in got["brute"]]
        speedups = ratios(brute_rounds, ours_rounds)
        _, truth = index.search_exact(queries, K)
        found = np.array([[i for i, _ in index.search(q, K)] for q in queries])
        recall = recall_at_k(found, truth)
        # end to end: embed a real query, then search (ours) or scan (brute force)
        texts = (QUERY_TEXTS * 4)[:20]
        e2e_ours, e2e_brute = interleaved_ms(
            [lambda t, ix=index: ix.search(embedder.embed([t])[0], K),
             lambda t, m=matrix: brute_force(m, embedder.embed([t])[0])], texts)
        fig = {
            "count": index.count, "mode": index.mode,
            "ours_ms": round(statistics.median(ours_rounds), 4),
            "brute_ms": round(statistics.median(brute_rounds), 4),
            "speedup": round(spread(speedups)["median"], 1),
            "speedup_spread": {k: round(v, 2) for k, v in spread(speedups).items()},
            "e2e_speedup_spread": {k: round(v, 2) for k, v in spread(ratios(e2e_brute, e2e_ours)).items()},
            "recall_at_10": round(recall, 4),
            "e2e_ours_ms": round(statistics.median(e2e_ours), 3),
            "e2e_brute_ms": round(statistics.median(e2e_brute), 3),
            **write_figures,
        }
        figures[str(n)] = fig
        rows.append(fig)

    # memory_write end to end at the largest size: embed + add
    write_ms = per_call_ms(lambda t: index.add(embedder.embed([t])), [f"{t} #{i}" for i, t in
                                                                     enumerate(QUERY_TEXTS * 3)])
    figures["e2e_write_ms_median"] = round(statistics.median(write_ms), 3)
    figures["total_s"] = round(time.perf_counter() - bench_started, 1)
    big = figures[str(biggest)]
    worst_block = max(big.get("max_write_block_ms_build", 0.0), big.get("max_write_block_ms_merge", 0.0))
    figures["targets"] = {
        "speedup_ge_20x": big["speedup"] >= TARGET_SPEEDUP,
        "recall_ge_0.95": big["recall_at_10"] >= TARGET_RECALL,
        "write_block_le_100ms": worst_block <= TARGET_BLOCK_MS,
    }
    if opts.json:
        print(json.dumps(figures, indent=1))
        return

    table = Table(title=f"memory_read, top-{K}, {opts.queries} queries (median ms per query over "
                        f"{opts.rounds} rounds of a shuffled order; speedup: median of the "
                        f"paired per-round ratios, IQR, min-max; load average {load()})")
    for col in ("memories", "index", "ours", "brute force", "speedup (IQR) min-max",
                "recall@10", "ours + embed", "brute + embed"):
        table.add_column(col, justify="right")
    e2e_lines: list[str] = []
    for fig in rows:
        sp, e2e = fig["speedup_spread"], fig["e2e_speedup_spread"]
        table.add_row(f"{fig['count']:,}", fig["mode"], f"{fig['ours_ms']:.3f}",
                      f"{fig['brute_ms']:.3f}",
                      f"{fig['speedup']:.1f}x ({sp['q1']:.1f}-{sp['q3']:.1f}) "
                      f"{sp['min']:.1f}-{sp['max']:.1f}",
                      f"{fig['recall_at_10']:.3f}", f"{fig['e2e_ours_ms']:.2f}",
                      f"{fig['e2e_brute_ms']:.2f}")
        e2e_lines.append(f"{fig['count']:,}: {e2e['median']:.2f}x (IQR {e2e['q1']:.2f}-{e2e['q3']:.2f}, "
                         f"min {e2e['min']:.2f}, max {e2e['max']:.2f})")
    console.print(table)
    console.print(f"end to end (embed + search), brute / ours paired query by query: "
                  f"{'; '.join(e2e_lines)}")
    console.print(f"query embedding (all-MiniLM-L6-v2, CPU): {embed_med:.2f} ms median; "
                  f"model load {load_s:.1f} s; memory_write end to end "
                  f"{figures['e2e_write_ms_median']:.2f} ms median")
    console.print(f"HNSW at {biggest:,}: built in {big.get('build_s')} s in the background, "
                  f"efSearch {big.get('ef_search')} (tuned recall {big.get('tuned_recall')}); "
                  f"{big.get('writes_during_build')} writes during the build, longest blocked "
                  f"{big.get('max_write_block_ms_build')} ms; {big.get('writes_during_merge')} "
                  f"writes during the delta merge, longest blocked "
                  f"{big.get('max_write_block_ms_merge')} ms")
    marks = {True: "[green]met[/green]", False: "[red]MISSED[/red]"}
    t = figures["targets"]
    console.print(f"targets at {biggest:,}: search >= {TARGET_SPEEDUP:.0f}x brute force "
                  f"{marks[t['speedup_ge_20x']]}, recall@10 >= {TARGET_RECALL} "
                  f"{marks[t['recall_ge_0.95']]}, writes blocked <= {TARGET_BLOCK_MS:.0f} ms "
                  f"{marks[t['write_block_le_100ms']]}; total {figures['total_s']} s")


if __name__ == "__main__":
    main()
