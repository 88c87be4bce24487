#!/usr/bin/env python3
"""Writes the hand-made fish-results/1 fixtures in this folder (deterministic; re-run after a
format change and review the diff):

  sweep.jsonl    experiment "fixture_sweep": n_threads {1,2,4} x act {int8,f32} on the CPU, n_ctx
                 fixed; written as two runs (the second a resume) so it has two context lines;
                 cell 1 appears twice (the later row, from the resume, must win); cell 5 failed.
  quality.jsonl  experiment "fixture_quality": weight_type {q4_0,q8_0,f16} with bits_per_weight,
                 cpu and gpu paths, quality metrics.
  bad.jsonl      one problem per line, for the reader's file:line messages.
  shard_{0,1,2}_of_3.jsonl  the six cells of sweep.jsonl's final state split by cell_index % 3,
                 each with its own context line (shard i/3); merged they equal the sweep rows.
"""
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA = "ab" * 32
EXP_SHA = "cd" * 32


def context(run_id, experiment, n_cells, shard=(0, 1), exp_sha=EXP_SHA, cpu="Fixture CPU x2"):
    return {"kind": "context", "schema": "fish-results/1", "harness_version": "0.1.0",
            "run_id": run_id, "experiment": experiment,
            "experiment_file": f"experiments/{experiment}.json", "experiment_sha256": exp_sha,
            "n_cells": n_cells, "shard": {"index": shard[0], "count": shard[1]},
            "started_utc": "2026-11-29T15:00:00Z", "commit": "0123456789abcdef0123456789abcdef01234567",
            "dirty": False, "build_type": "Release", "build_flags": "-O3", "compiler": "g++ 12.2.0",
            "cpu": cpu, "cpu_features": "avx2 avx512f", "n_cpus": 2, "gpu": None,
            "gpu_driver": None, "vulkan": None, "os": "Debian GNU/Linux 12 (bookworm)",
            "host": "fixture", "stream_GBps": {"median": 16.0, "ci95": [15.5, 16.4], "n": 5}}


def speed(samples):
    s = sorted(samples)
    n = len(s)
    med = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    mean = sum(s) / n
    sd = (sum((x - mean) ** 2 for x in s) / (n - 1)) ** 0.5
    return {"median": med, "ci95": [s[0], s[-1]], "cv": round(sd / mean, 6), "n": n,
            "samples": samples}


def cell_id(config, workload):
    canon = json.dumps({"harness_version": "0.1.0", "model_sha256": MODEL_SHA, "config": config,
                        "workload": workload, "quality": {}}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def row(run_id, index, path, config, decode, prefill, status="ok", error=None, quality=None,
        extra_metrics=None):
    workload = {"n_prompt": 64, "n_gen": 32, "seed": 1, "prompt_source": "builtin"}
    metrics = {"prefill_tok_s": speed(prefill) if prefill else None,
               "decode_tok_s": speed(decode) if decode else None,
               "weight_GBps": round(speed(decode)["median"] * 0.0964, 4) if decode else None,
               "weight_GBps_pct_stream": round(speed(decode)["median"] * 0.0964 / 16.0 * 100, 3)
               if decode else None,
               "rss_peak_MB": 180.0 if status == "ok" else None, "vram_peak_MB": None,
               "rel_rms": None, "top1": None, "kl_mean": None, "kl_p99": None, "kl_max": None,
               "ppl": None, "greedy_exact": None}
    metrics.update(quality or {})
    metrics.update(extra_metrics or {})
    return {"kind": "row", "run_id": run_id, "cell_id": cell_id(config, workload),
            "cell_index": index, "path": path, "status": status, "error": error, "model": MODEL,
            "model_sha256": MODEL_SHA, "config": config, "workload": workload,
            "placement": {"gpu_layers": 0, "gpu_detail": ""}, "metrics": metrics,
            "validity": [] if status == "ok" else [], "t_wall_s": 3.5}


def sweep_cells(run_id):
    """The six cells of fixture_sweep: index -> row (final state)."""
    out = {}
    i = 0
    for act in ["int8", "f32"]:
        for threads in [1, 2, 4]:
            cfg = {"act": act, "n_ctx": 512, "n_threads": threads}
            base = (40.0 if act == "int8" else 25.0) * min(threads, 2) ** 0.9
            dec = [round(base * f, 3) for f in (1.0, 0.98, 1.02, 0.99, 1.01)]
            pre = [round(base * 6 * f, 2) for f in (1.0, 0.97, 1.03, 0.99, 1.02)]
            if i == 5:
                out[i] = row(run_id, i, "cpu", cfg, None, None, status="error",
                             error="fixture: session: out of memory for n_ctx 512")
            else:
                out[i] = row(run_id, i, "cpu", cfg, dec, pre)
            i += 1
    return out


def write(name, lines):
    with open(os.path.join(HERE, name), "w") as f:
        for l in lines:
            f.write(l if isinstance(l, str) else json.dumps(l, separators=(",", ":")))
            f.write("\n")


def main():
    run_a, run_b = "a1a1a1a1a1a1a1a1", "b2b2b2b2b2b2b2b2"
    first = sweep_cells(run_a)
    final = sweep_cells(run_b)
    # Run a finished cells 0..2, but cell 1 is re-measured in the resume (a later row wins).
    stale = dict(first[1])
    stale["metrics"] = dict(stale["metrics"])
    stale["metrics"]["decode_tok_s"] = speed([1.0, 1.0, 1.0, 1.0, 1.0])
    write("sweep.jsonl", [context(run_a, "fixture_sweep", 6), first[0], stale, first[2],
                          context(run_b, "fixture_sweep", 6), final[1], final[3], final[4],
                          final[5]])
    # Shards of the same cells: cell i goes to shard i % 3 (first[0], first[2] as in sweep.jsonl).
    merged_final = {0: first[0], 1: final[1], 2: first[2], 3: final[3], 4: final[4], 5: final[5]}
    for s in range(3):
        rid = f"5{s}" * 8
        rows = []
        for i in sorted(merged_final):
            if i % 3 == s:
                r = dict(merged_final[i])
                r["run_id"] = rid
                rows.append(r)
        write(f"shard_{s}_of_3.jsonl", [context(rid, "fixture_sweep", 6, (s, 3))] + rows)

    run_q = "c3c3c3c3c3c3c3c3"
    q = [context(run_q, "fixture_quality", 3, exp_sha="ef" * 32)]
    for i, (wt, bpw, top1, kl) in enumerate([("q4_0", 4.5, 0.91, 0.031), ("q8_0", 8.5, 0.985, 0.0021),
                                              ("f16", 16.0, 1.0, 0.0)]):
        for path, scale in (("cpu", 1.0), ("gpu", 3.0)):
            dec = [round(60 * scale * 4.5 / bpw * f, 3) for f in (1.0, 0.99, 1.01, 1.0, 0.995)]
            q.append(row(run_q, i, path, {"n_ctx": 512, "weight_type": wt}, dec, None,
                         quality={"top1": top1, "kl_mean": kl, "kl_p99": kl * 8, "kl_max": kl * 20,
                                  "ppl": round(9.5 + kl * 30, 4),
                                  "greedy_exact": {"n": 12 if kl == 0 else 9, "of": 12}},
                         extra_metrics={"bits_per_weight": bpw}))
    write("quality.jsonl", q)

    good = sweep_cells(run_a)[0]
    bad_kind = dict(good, kind="rows")
    bad_path = dict(good, path="npu")
    bad_cell = dict(good, cell_id="XYZ")
    no_metrics = {k: v for k, v in good.items() if k != "metrics"}
    bad_speed = json.loads(json.dumps(good))
    bad_speed["metrics"]["decode_tok_s"]["ci95"] = [1.0]
    orphan = dict(good, run_id="ffffffffffffffff")
    error_without_message = dict(good, status="error", error=None)
    write("bad.jsonl", [context(run_a, "fixture_sweep", 6), good, "{not json", "[1, 2]", bad_kind,
                        bad_path, bad_cell, no_metrics, bad_speed, orphan, error_without_message,
                        dict(context(run_b, "fixture_sweep", 6), schema="fish-results/0")])


if __name__ == "__main__":
    main()
