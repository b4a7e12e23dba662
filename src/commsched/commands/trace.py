"""``commsched trace``: trace a real model with TensorFlow, check a trace, count a model.

* ``commsched trace --model NAME --batch B --mode train|infer [--out FILE]`` traces one
  iteration (:func:`commsched.trace.tf.trace_model`) and writes the traced graph and, beside
  it (or under ``--raw-out DIR``), the raw trace ``<name>.raw.json.gz``.
* ``commsched trace --framework torch --model NAME --batch B --mode train|infer
  --device cpu|cuda`` traces a PyTorch model (:func:`commsched.trace.torch.trace_model`;
  models: :mod:`commsched.trace.torch_models`) into
  ``results/traces/<model>-torch-<device>-<mode>-b<batch>.json.gz`` (no raw trace: the
  per-step samples are in the graph).
* ``commsched trace --check GRAPH RAW`` rejects a raw trace that does not match its graph,
  naming the op (:func:`commsched.model.traced.check_trace`).
* ``commsched trace --count MODEL [MODEL ...] --out FILE`` writes TicTac Table 1's columns
  (parameters, ops in inference and training) of each model as JSON, without running it.
* ``commsched trace --list`` prints the model zoo.
* ``commsched trace import-chakra ET [ET ...] -o GRAPH [--strict]`` reads Chakra execution
  traces (files or directories of per-rank ``*.et``) into one op graph
  (:func:`commsched.io.chakra.import_chakra`) and prints one summary line with what could
  not be mapped.
* ``commsched trace export-chakra GRAPH -o PREFIX [--replicas N]`` writes any op graph as
  per-rank Chakra ETs ``PREFIX.<rank>.et`` (:func:`commsched.io.chakra.export_chakra`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import networkx as nx

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.model import graph
from commsched.trace import zoo
from commsched.validation import SEED, flag, input_file, output_file

SMALL = flag(1, 2**16, integer=True)
THREADS = flag(1, 1024, integer=True)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "trace",
        help="trace a model into an op graph (or check / count; Chakra ET import / export)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    action = p.add_mutually_exclusive_group()
    action.add_argument("--check", nargs=2, metavar=("GRAPH", "RAW"), type=input_file,
                        help="check that a raw trace matches its traced graph")
    action.add_argument("--count", nargs="+", metavar="MODEL",
                        help="write the model-table columns of MODELs (JSON) to --out")
    action.add_argument("--list", action="store_true", help="list the model zoo")
    p.add_argument("--framework", choices=["tf", "torch"], default="tf",
                   help="TensorFlow (default) or PyTorch")
    p.add_argument("--model", help="model name (see --list)")
    p.add_argument("--batch", type=SMALL, help="batch size (default: the model's standard batch)")
    p.add_argument("--mode", choices=["train", "infer"], default="train")
    p.add_argument("--size", "--image-size", type=SMALL, dest="size",
                   help="input size: image side or sequence length (default: the model's)")
    p.add_argument("--warmup", type=flag(0, 10**4, integer=True), default=2,
                   help="untraced warm-up iterations")
    p.add_argument("--iters", type=flag(1, 10**4, integer=True), default=3,
                   help="traced iterations (K samples per op)")
    p.add_argument("--intra-threads", type=THREADS,
                   help="intra-op threads (default: 2 with tf, 1 with torch)")
    p.add_argument("--inter-threads", type=THREADS, default=1, help="inter-op threads")
    p.add_argument("--device", choices=["cpu", "gpu", "cuda"], default="cpu",
                   help="cpu, or a GPU: 'gpu' (tf) / 'cuda' (torch)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--min-coverage", type=flag(0, 1), default=0.95,
                   help="fail if fewer ops got a time (default 0.95)")
    p.add_argument("--out", type=output_file, help="traced graph to write "
                   "(default results/traces/<model>-<mode>-b<batch>.json.gz)")
    p.add_argument("--raw-out", metavar="DIR", help="directory of the raw trace "
                   "(default: beside --out)")
    p.set_defaults(func=run)
    # Subcommands after the options above, so that every flag-only invocation still works.
    chakra = p.add_subparsers(dest="trace_action", metavar="{import-chakra,export-chakra}")
    imp = chakra.add_parser("import-chakra", help="Chakra execution traces -> op graph")
    imp.add_argument("inputs", nargs="+", metavar="ET", type=input_file,
                     help="per-rank Chakra ET files (*.et) or directories of them")
    imp.add_argument("-o", "--output", required=True, type=output_file,
                     help="op graph to write (.json[.gz])")
    imp.add_argument("--strict", action="store_true",
                     help="fail on anything that cannot be mapped instead of counting it")
    imp.set_defaults(func=_import_chakra)
    exp = chakra.add_parser("export-chakra", help="op graph -> per-rank Chakra ETs")
    exp.add_argument("graph", type=input_file,
                     help="op graph (.json[.gz]): a trace, a view, a generated graph")
    exp.add_argument("-o", "--output", required=True, metavar="PREFIX",
                     help="files PREFIX.<rank>.et (ASTRA-sim's naming)")
    exp.add_argument("--replicas", type=flag(1, 2**16, integer=True),
                     help="write a one-rank graph as N data-parallel ranks")
    exp.set_defaults(func=_export_chakra)


def _import_chakra(args: argparse.Namespace) -> int:
    from commsched.io.chakra import import_chakra

    imported = import_chakra(args.inputs, strict=args.strict)
    graph.save(imported.graph, args.output)
    print(f"{args.output}: {imported.summary()}")
    return 0


def _export_chakra(args: argparse.Namespace) -> int:
    from commsched.io.chakra import export_chakra

    paths = export_chakra(graph.load(args.graph), args.output, replicas=args.replicas)
    print(f"{args.graph}: {len(paths)} Chakra ET file(s): {', '.join(map(str, paths))}")
    return 0


def _list() -> int:
    for s in zoo.MODELS.values():
        print(f"{s.name:20s} {s.title:22s} size {s.size:4d}  batch {s.standard_batch:2d}  "
              f"[{', '.join(s.families)}] {s.reference}")
    return 0


def _check(graph_path: str, raw_path: str) -> int:
    from commsched.model.traced import check_trace, load_raw, load_trace

    check_trace(load_trace(graph_path), load_raw(raw_path))
    print(f"{raw_path} matches {graph_path}")
    return 0


def _count(models: list[str], out: str | None, size: int | None, batch: int | None) -> int:
    from commsched.trace.tf import count_model

    if not out:
        raise CommschedError("--count needs --out FILE")
    for m in models:
        zoo.get(m)  # unknown names fail before TensorFlow is imported
    counts = {m: count_model(m, size, batch) for m in models}
    atomic_write_text(out, json.dumps(counts, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {len(counts)} models")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    if args.check:
        return _check(*args.check)
    if args.count:
        return _count(args.count, args.out, args.size, args.batch)
    if not args.model:
        raise CommschedError("--model is required (see commsched trace --list)")
    if args.framework == "torch":
        return _trace_torch(args)
    spec = zoo.get(args.model)
    batch = spec.standard_batch if args.batch is None else args.batch
    out = Path(args.out or f"results/traces/{args.model}-{args.mode}-b{batch}.json.gz")
    stem = out.name.removesuffix(".gz").removesuffix(".json")
    raw_out = (Path(args.raw_out) if args.raw_out else out.parent) / f"{stem}.raw.json.gz"

    from commsched.model.traced import save_raw
    from commsched.trace.tf import trace_model

    g, raw = trace_model(
        args.model, batch, args.mode, size=args.size, warmup=args.warmup,
        iterations=args.iters, intra_threads=args.intra_threads or 2,
        inter_threads=args.inter_threads, device=args.device, seed=args.seed,
        min_coverage=args.min_coverage,
    )
    save_raw(raw, raw_out)
    return _save(g, out, "variables", f"; raw trace {raw_out}")


def _save(g: nx.DiGraph, out: Path, variables: str, tail: str = "") -> int:
    """Save a traced graph and print its one-line summary (``variables``: what the
    framework calls them)."""
    graph.save(g, out)
    meta = g.graph["meta"]
    print(f"{out}: {g.number_of_nodes()} ops, {len(g.graph['variables'])} {variables}, "
          f"coverage {meta['coverage']:.1%}, step {statistics.median(meta['step_wall_s']):.4g} s "
          f"(median of {len(meta['step_wall_s'])}){tail}")
    return 0


def _trace_torch(args: argparse.Namespace) -> int:
    from commsched.trace import torch_models
    from commsched.trace.torch import trace_file_name, trace_model

    if args.device == "gpu":
        raise CommschedError("with --framework torch the GPU device is called 'cuda'")
    spec = torch_models.get(args.model)
    batch = 8 if args.batch is None else args.batch
    out = Path(args.out or Path("results/traces") / trace_file_name(
        spec.name, args.device, args.mode, batch))
    g = trace_model(
        spec.name, batch, args.mode, size=args.size, warmup=args.warmup,
        iterations=args.iters, threads=args.intra_threads or 1, device=args.device,
        seed=args.seed, min_coverage=args.min_coverage,
    )
    return _save(g, out, "parameters")
