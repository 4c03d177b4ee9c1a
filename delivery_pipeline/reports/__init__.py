"""What delivery did and what it cost, read after the fact: the daily delivery report.

* ``report``: one UTC day's documents, parts, knocks and abandonments, and the
  way each delivered document went;
* ``costs``: the same day's billed messages and, with a rate table, its spend;
* ``rates``: the rate table (``DELIVERY_RATE_TABLE``), apart from ``costs`` so
  the webhook service prices a document for its application without pandas.

Reading, not watching: nothing here alerts or waits (``watch/`` does). No
Dagster here: the ``delivery_report`` asset (``dagster_defs/assets.py``)
builds the report from these.
"""
