"""Sending: what goes on the wire and what came back.

The items of a run (``items``, with the server's capabilities from ``discover`` and the
haystack calibrated by ``calibrate``), one arm's shared context and warm-up (``arm``), the
shaped waves (``waves``), the client processes (``clients``), the server's load and CPU
(``load``, ``cpu``). Never imports the judge: ``probe`` asks the judge, and hands the
sending side a ``record`` hook that keeps each request and scores each answer.
"""
