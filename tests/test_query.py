"""hpcvirt.query.select: a selector's values compared as text, with each
column coded once per table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hpcvirt.query import select


def _table() -> pd.DataFrame:
    return pd.DataFrame({
        "testbed": ["local", "vm", "vm", "bridge", "vm"],
        "ranks": [2, 4, 4, 2, 2],
        "msg_bytes": [8.0, 8.0, np.nan, 8.0, 1024.0],
        "variant": ["", "W", "W", "", None],
        "value": [1.0, 2.0, 3.0, 4.0, 5.0],
    })


def test_select_compares_as_text_like_the_selectors_in_yaml():
    t = _table()
    assert list(select(t, {"testbed": "vm"})["value"]) == [2.0, 3.0, 5.0]
    assert list(select(t, {"testbed": "vm", "ranks": 4})["value"]) == [2.0, 3.0]
    assert list(select(t, {"ranks": "2", "msg_bytes": 8.0})["value"]) == [1.0, 4.0]
    assert list(select(t, {"variant": "W", "at": "peak"})["value"]) == [2.0, 3.0]   # `at` is not a column
    assert select(t, {"testbed": "nowhere"}).empty
    assert select(t, {"testbed": "vm", "ranks": 8}).empty
    assert select(t, {"testbed": "vm", "placement": "mixed"}).empty      # a column the table lacks: no rows
    # the same as comparing each value's text, on every column and value of the table
    for col in t.columns:
        for v in {str(x) for x in t[col]}:
            want = [str(x) == v for x in t[col]]
            assert list(select(t, {col: v}).index) == list(t.index[want]), (col, v)


def test_a_column_assigned_anew_is_selected_by_its_new_values():
    t = _table()
    assert len(select(t, {"testbed": "vm"})) == 3
    t["testbed"] = ["vm"] * 5
    assert len(select(t, {"testbed": "vm"})) == 5
    sub = select(t, {"ranks": 2})        # a selection is a table of its own
    assert list(select(sub, {"testbed": "vm"})["value"]) == [1.0, 4.0, 5.0]
