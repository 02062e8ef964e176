"""Implementations the suite is tested against: wrong ones it must reject, correct but
different ones it must accept. Point ``recon-spec check`` at any of them, e.g.
``recon-spec check properties.zoo.wrong:global_token_mean``.
"""
