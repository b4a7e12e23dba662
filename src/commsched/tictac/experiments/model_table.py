"""TicTac's model table (SysML 2019, Table 1) for our zoo, beside the paper's values.

Input: the model counts ``commsched trace --count`` wrote (committed under
``data/models/counts.json``; parameters, their bytes and the ops of the inference and the
training graph of every model, counted on graphs built exactly as the tracer builds them),
and the paper's values (``papers/model_table.yaml``, unknown cells null). Output:

* ``results/tables/model_table.csv``: one row per model of :mod:`commsched.trace.zoo`:
  params (trainable variables), param_mib (their total size in MiB), ops_infer and
  ops_train (ops of the inference and the training graph at the batch and input size of
  our default traces; Keras' LSTM builds other ops for a batch of 1), batch (that batch);
  ``paper_*``, the same columns from TicTac's Table 1; and ``note``, why ours may differ;
* ``results/metrics/model_table.csv``: ``model.<name>.{params,param_mib,ops_infer,
  ops_train}`` for the claims table.

No TensorFlow is imported. Run: ``python -m commsched.tictac.experiments.model_table --counts
data/models/counts.json --paper papers/model_table.yaml --table T.csv --metrics M.csv``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from commsched import driver
from commsched.errors import CommschedError
from commsched.io.structured import read_json, read_yaml
from commsched.trace import zoo

__all__ = ["COLUMNS", "load_counts", "load_paper", "main", "model_table", "table_metrics"]

#: The columns of TicTac's Table 1, ours and the paper's.
COLUMNS = ("params", "param_mib", "ops_infer", "ops_train", "batch")
_COUNT_FIELDS = ("params", "param_bytes", "ops_infer", "ops_train")


def load_counts(path: str) -> dict[str, dict[str, Any]]:
    """Read the model counts that ``commsched trace --count`` wrote.

    Parameters
    ----------
    path : str
        The counts file (JSON, ``{model: counts}``).

    Returns
    -------
    dict
        ``{model: {params, param_bytes, ops_infer, ops_train, ...}}``.

    Raises
    ------
    CommschedError
        Naming the file and the model: not an object, a model not in the zoo, or a
        count missing.
    """
    data = read_json(path)
    if not isinstance(data, dict):
        raise CommschedError(f"{path}: expected an object {{model: counts}}")
    for model, c in data.items():
        zoo.get(model)
        missing = [k for k in _COUNT_FIELDS if not isinstance(c, dict) or k not in c]
        if missing:
            raise CommschedError(f"{path}: model {model!r}: missing {', '.join(missing)}")
    return data


def load_paper(path: str) -> dict[str, dict[str, Any]]:
    """Read the paper's model table.

    Parameters
    ----------
    path : str
        YAML with ``models: {name: {column: value or null}}``, the columns among
        :data:`COLUMNS`.

    Returns
    -------
    dict
        ``{model: {column: value or None}}``.

    Raises
    ------
    CommschedError
        Naming the file and the model: no ``models`` mapping, a model not in the zoo, or
        an unknown column.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Appendix A, Table 1.
    """
    data = read_yaml(path)
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise CommschedError(f"{path}: expected a mapping 'models'")
    for model, row in models.items():
        zoo.get(model)
        if not isinstance(row, dict) or set(row) - set(COLUMNS):
            raise CommschedError(f"{path}: model {model!r}: columns must be among {COLUMNS}")
    return models


def model_table(
    counts: Mapping[str, Mapping[str, Any]], paper: Mapping[str, Mapping[str, Any]]
) -> pd.DataFrame:
    """Our model table beside the paper's: one row per counted model, in zoo order.

    Parameters
    ----------
    counts : mapping
        :func:`load_counts`'s counts.
    paper : mapping
        :func:`load_paper`'s table (models it lacks get empty ``paper_*`` cells).

    Returns
    -------
    pandas.DataFrame
        The columns of the module docstring.

    Raises
    ------
    CommschedError
        If no model of the zoo is in ``counts``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Appendix A, Table 1.

    Examples
    --------
    >>> t = model_table({"vgg16": {"params": 32, "param_bytes": 553430176, "ops_infer": 70,
    ...                            "ops_train": 250, "size": 224}},
    ...                 {"vgg16": {"params": 32, "param_mib": 527.79}})
    >>> print(t[["model", "params", "param_mib", "paper_param_mib"]].to_string(index=False))
    model  params  param_mib  paper_param_mib
    vgg16      32     527.79           527.79
    """
    rows = []
    for name, spec in zoo.MODELS.items():
        if name not in counts:
            continue
        c, p = counts[name], paper.get(name, {})
        rows.append({
            "model": name, "title": spec.title, "families": " ".join(spec.families),
            "params": int(c["params"]), "param_mib": round(c["param_bytes"] / 2**20, 2),
            "ops_infer": int(c["ops_infer"]), "ops_train": int(c["ops_train"]),
            "batch": int(c.get("batch", spec.standard_batch)),
            "size": int(c.get("size", spec.size)),
            **{f"paper_{k}": p.get(k) for k in COLUMNS},
            "note": spec.note,
        })
    if not rows:
        raise CommschedError("no model of the zoo in the counts")
    return pd.DataFrame(rows)


def table_metrics(table: pd.DataFrame) -> dict[str, float]:
    """The metrics of a model table, for the claims table.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`model_table`'s table.

    Returns
    -------
    dict of str to float
        ``model.<name>.<column>`` for every model and counted column (params,
        param_mib, ops_infer, ops_train).
    """
    return {
        f"model.{r['model']}.{k}": float(r[k])
        for _, r in table.iterrows()
        for k in ("params", "param_mib", "ops_infer", "ops_train")
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Write the model table and its metrics, and print the table.

    Parameters
    ----------
    argv : sequence of str, optional
        The two inputs and the two outputs (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 after a one-line error on stderr.
    """
    p = driver.parser(__name__, __doc__)
    p.add_argument("--counts", required=True, help="commsched trace --count output")
    p.add_argument("--paper", required=True, help="the paper's table (YAML)")
    p.add_argument("--table", required=True)
    p.add_argument("--metrics", required=True)
    args = p.parse_args(argv)

    def body() -> None:
        table = model_table(load_counts(args.counts), load_paper(args.paper))
        config = {"counts": args.counts, "paper": args.paper}
        driver.write_outputs({args.table: table}, table_metrics(table), args.metrics, config)
        print(table.drop(columns=["note", "families"]).to_string(index=False))

    return driver.run("model_table", body)


if __name__ == "__main__":
    sys.exit(main())
