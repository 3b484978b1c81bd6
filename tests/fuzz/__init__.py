"""Fuzzing the request path: request bodies generated from the message declarations,
encoded with the project's encoder, then mutated (issue 11).

* ``strategies``: Hypothesis strategies for request bodies, derived from the field types.
* ``layout``: where the lengths, counts, tagged sections and integers of a frame are.
* ``mutate``: cheap byte mutations that use that layout (shared by the Hypothesis
  tests and the live run).
* ``inprocess``: the real Dispatcher and handlers over a real Broker, in this process.
* ``live``: the long run against a broker process (``bench/fuzz_live.py``).
"""
