"""The settings sections, one a module, each named as its field of ``Settings``
(``settings.delivery`` is ``sections/delivery.py``), with the defaults and limits
only it names. A section imports no other section: what several share is in
``settings/section.py``, the lists a variable holds in ``settings/parsing.py``.

Annotations are evaluated, not postponed (no ``from __future__ import
annotations``): pydantic would compile each field's string again when it builds
the models, at every process's start-up (docs/benchmarks.md, "Start-up").
"""
