"""Implementations the suite is tested against: wrong ones it must reject, correct but
different ones it must accept. Point ``recon-spec check`` at any of them, e.g.
``recon-spec check properties.zoo.wrong:global_token_mean``, and ``recon-spec check-api``
at the APIs of ``properties.zoo.api``, e.g.
``recon-spec check-api properties.zoo.api.wrong:router_switch_ignored``.
"""
