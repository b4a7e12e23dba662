"""Export sockeye's training graphs (PACE's Seq2Seq and Transformer) as MXNet symbol JSON.

Runs ONLY in a side environment, never in the project's: Python 3.8 with
``mxnet==1.5.1 "numpy<1.24"`` and ``sockeye==1.18.93`` (``pip install --no-deps``, plus
``pyyaml portalocker typing sacrebleu==1.3.6``); mxnet 1.5 has no wheel for Python 3.11.
For example::

    /root/.pyenv/versions/3.8.18/bin/python -m venv /tmp/sockeye-venv
    /tmp/sockeye-venv/bin/pip install mxnet==1.5.1 "numpy<1.24" pyyaml portalocker typing \
        sacrebleu==1.3.6
    /tmp/sockeye-venv/bin/pip install --no-deps sockeye==1.18.93
    /tmp/sockeye-venv/bin/python scripts/sockeye_symbols.py --out data/models/sockeye

For each model it builds the symbol sockeye's ``TrainingModel`` binds for training (the
``sym_gen`` of its default bucket, the largest: ``--max-seq-len`` + 1 tokens each side)
without data, with the vocabulary sizes given below, and writes

- ``<model>.json.gz``: the symbol (``mx.sym.save``), every parameter variable carrying its
  shape in MXNet's own ``__shape__`` attribute (data inputs carry none), read by
  ``commsched.pace.operators.symbol_operators``;
- ``<model>.mxnet.json``: what MXNet 1.5 itself counts when it binds the symbol for
  training (parameters with ``grad_req='write'``, the data without gradients): parameter
  arrays and values, forward nodes, backward nodes (``<forward node>_backward``) and the
  gradient sums it inserts (``add_n`` / ``_grad_add``), parsed from the executor's
  ``debug_str``; the project's tests check its JSON-only counter against these numbers.

PACE (Bao et al., INFOCOM 2020) Sec. VI trains sockeye's Seq2Seq and Transformer on
WMT 2017 with MXNet 1.5; Table II gives their parameters, all-reduce operators and
computation operators. sockeye and MXNet are Apache-2.0 licensed.
"""


# ruff: noqa: I001, B905
# (Python 3.8: zip has no strict; sockeye.train must be imported before mxnet)
import argparse
import gzip
import json
import os
import re
import sys
import tempfile

from sockeye import train  # must come before mxnet (sockeye.multiprocessing_utils)
import mxnet as mx
import numpy as np
from sockeye import arguments, data_io, training
from sockeye import constants as C

VOCAB = 32000
#: model: (sockeye.train flags, (source, target) vocabulary sizes, why this configuration)
MODELS = {
    "transformer_sockeye": (
        [], (VOCAB, VOCAB),
        "sockeye's defaults (Transformer base: 6+6 layers, model size 512, 8 heads, "
        "feed-forward 2048, fixed positional encodings, no weight tying, --max-seq-len 99)",
    ),
    "seq2seq_sockeye": (
        ["--encoder", "cnn", "--decoder", "cnn"], (VOCAB, VOCAB),
        "sockeye's defaults for its convolutional sequence-to-sequence model (--encoder cnn "
        "--decoder cnn: 6+6 GLU convolution layers of 512, kernel width 3, learned positional "
        "embeddings, --max-seq-len 99): the sockeye encoder-decoder whose parameter arrays "
        "are Table II's 32 (its RNNs unroll over the sentence and cannot have 293 operators)",
    ),
}


def training_symbol(flags, vocab):
    """The symbol sockeye's TrainingModel binds for its default bucket, and that bucket."""
    parser = argparse.ArgumentParser()
    arguments.add_train_cli_args(parser)
    with tempfile.TemporaryDirectory() as d:
        empty = os.path.join(d, "empty")
        open(empty, "w").close()
        args = parser.parse_args(["-s", empty, "-t", empty, "-vs", empty, "-vt", empty,
                                  "-o", os.path.join(d, "out"), *flags])
    # train.train adds one token for BOS/EOS; the default bucket is the largest
    bucket = tuple(n + C.SPACE_FOR_XOS for n in args.max_seq_len)
    config_data = data_io.DataConfig(data_statistics=None, max_seq_len_source=bucket[0],
                                     max_seq_len_target=bucket[1], num_source_factors=1)
    config = train.create_model_config(args=args, source_vocab_sizes=[vocab[0]],
                                       target_vocab_size=vocab[1],
                                       max_seq_len_source=bucket[0],
                                       max_seq_len_target=bucket[1], config_data=config_data)
    config.freeze()
    captured = {}

    class Capture:
        """Stands in for mx.mod.BucketingModule: keeps the default bucket's symbol."""

        def __init__(self, sym_gen, default_bucket_key, **kwargs):
            captured["symbol"] = sym_gen(default_bucket_key)[0]

        def bind(self, **kwargs):
            pass

        @property
        def symbol(self):
            return captured["symbol"]

    training.mx.mod.BucketingModule = Capture
    provide_data = [mx.io.DataDesc(C.SOURCE_NAME, (1, bucket[0], 1)),
                    mx.io.DataDesc(C.TARGET_NAME, (1, bucket[1]))]
    provide_label = [mx.io.DataDesc(C.TARGET_LABEL_NAME, (1, bucket[1]))]
    with tempfile.TemporaryDirectory() as d:
        training.TrainingModel(config=config, context=[mx.cpu()], output_dir=d,
                               provide_data=provide_data, provide_label=provide_label,
                               default_bucket_key=bucket, bucketing=True)
    return captured["symbol"], bucket


def export(name, out):
    flags, vocab, why = MODELS[name]
    with mx.name.NameManager():  # fresh automatic names (dropout0, ...) for every model
        sym, bucket = training_symbol(flags, vocab)
    data = {C.SOURCE_NAME: (1, bucket[0], 1), C.TARGET_NAME: (1, bucket[1]),
            C.TARGET_LABEL_NAME: (1, bucket[1])}
    names = sym.list_arguments()
    shapes = dict(zip(names, sym.infer_shape(**data)[0]))
    params = {a: s for a, s in shapes.items() if a not in data}
    graph = json.loads(sym.tojson())
    for node in graph["nodes"]:
        if node["op"] == "null" and node["name"] in params:
            node.setdefault("attrs", {})["__shape__"] = str(tuple(params[node["name"]]))
    with gzip.GzipFile(os.path.join(out, name + ".json.gz"), "wb", mtime=0) as f:
        f.write(json.dumps(graph, indent=1, sort_keys=True).encode())
    req = {a: ("null" if a in data else "write") for a in names}
    exe = sym.simple_bind(mx.cpu(), grad_req=req, **data)
    ops = re.findall(r"^Op:([^,]+), Name=(.*)$", exe.debug_str(), re.M)
    forward = {n["name"] for n in graph["nodes"] if n["op"] != "null"}
    backward = [n for _, n in ops if n.endswith("_backward") and n[:-len("_backward")] in forward]
    executed_forward = [n for _, n in ops if n in forward]
    sums = [o for o, n in ops if n not in forward and n not in backward]
    counts = {
        "model": name, "why": why, "sockeye_flags": flags,
        "vocabulary": {"source": vocab[0], "target": vocab[1]},
        "bucket": {"source": bucket[0], "target": bucket[1]},
        "sockeye_version": sys.modules["sockeye"].__version__, "mxnet_version": mx.__version__,
        "parameter_arrays": len(params),
        "parameters": int(sum(int(np.prod(s)) for s in params.values())),
        "forward_nodes": len(executed_forward), "backward_nodes": len(backward),
        "other_nodes": {o: sums.count(o) for o in sorted(set(sums))},
        "table2_operators": len(executed_forward) + len(backward),
    }
    with open(os.path.join(out, name + ".mxnet.json"), "w") as f:
        json.dump(counts, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(counts, sort_keys=True))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for <model>.json.gz, <model>.mxnet.json")
    p.add_argument("--models", nargs="+", default=sorted(MODELS), choices=sorted(MODELS))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        export(name, args.out)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # mxnet 1.5's engine threads abort the interpreter's normal exit ("terminate called
    # without an active exception"); everything is written by now
    os._exit(code)
