"""The API objects ``recon-spec check-api`` is tested against: ``properties.zoo.api.correct``,
written from the seed, whose ``api(mistake=None)`` switches on one realistic mistake at a
time, and ``properties.zoo.api.wrong``, which names each of them
(``properties.zoo.api.wrong:router_switch_ignored``)."""
