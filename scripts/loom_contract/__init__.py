"""The parts of the Loom contract fixture's generator (CON-1, BACK-4).

``scripts/loom_contract_fixture.py`` is the command line; what it does lives here, one concern
per module: ``usage`` declares what Nerve sends to and reads from each Loom op, ``schema`` reads
JSON Schema well enough to judge that usage, ``checkout`` reads a Loom checkout (and defines the
``Refusal`` every part raises), and ``fixture`` holds the usage against the checkout and the
Loom wording and renders the fixture's text.
"""
