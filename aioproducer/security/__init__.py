"""Securing broker connections: SASL authentication and TLS (issue #13).

The pieces here are kept apart from the network code on purpose. The SASL
mechanisms (:mod:`aioproducer.security.sasl`) are pure state machines that turn
the broker's last message into the client's next one, and the JAAS parser
(:mod:`aioproducer.security.jaas`) reads the ``sasl.jaas.config`` string Java
users paste; neither does I/O, so both are tested byte for byte against the
RFCs' published exchanges without a socket, an event loop or a broker. The
connection layer drives them (SaslHandshake, then SaslAuthenticate round trips)
and owns everything that waits. Import the submodules directly; this package
re-exports nothing, so that each part can be added without touching the others.
"""
