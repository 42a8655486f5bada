"""Facades and dialects for programs written for another Kafka client.

* :mod:`aioproducer.compat.aiokafka`: ``AIOKafkaProducer`` with aiokafka's keywords, methods,
  ``RecordMetadata`` and ``errors`` module, over :class:`aioproducer.Producer`.
* :mod:`aioproducer.compat.confluent`: confluent-kafka's ``AIOProducer`` shape, its delivered
  message object and ``KafkaException`` / ``KafkaError``.
* :mod:`aioproducer.compat.librdkafka`: librdkafka's configuration keys (confluent-kafka's dialect),
  each translated to the Java key, accepted with a warning, or refused naming the key to use.
  ``Producer`` and ``ProducerConfig`` read that dialect directly; this module holds its table.

Nothing here is imported by ``import aioproducer``: a program that does not use a facade pays
nothing for it, and the plain ``Producer.send()`` path does not know the facades exist.
"""

__all__: list[str] = []
